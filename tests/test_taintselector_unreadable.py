"""Updates the taint-selector controller cannot read. Its cache drops an object whose new version
does not parse, so that no pass decides on a version that has since changed; the selectors whose
pass read that object must then be queued as its deletion queues them, or they go on reporting, and
tainting by, a view the cache no longer holds.
"""

from __future__ import annotations

from test_taintselector_tombstones import (
    CLAIM,
    DEVICE_CLASS,
    NAMESAKE,
    OWNED_RULE,
    SELECTOR_BODY,
    SLICE,
    outcome_of,
)
from tombstone_support import unreadable_update_test, watched

from operators.taintselector.controller import TaintSelectorController as Controller

KINDS = [
    watched(Controller, "selector", SELECTOR_BODY, "spec"),
    watched(Controller, "slice", SLICE, "spec"),
    watched(Controller, "class", DEVICE_CLASS, "spec"),
    watched(Controller, "claim", CLAIM, "status"),
    watched(Controller, "rule", OWNED_RULE, "spec"),
    watched(Controller, "rule", NAMESAKE, "spec", id="rule-of-someone-else"),
]

test_an_update_that_cannot_be_read_changes_what_the_deletion_does = unreadable_update_test(
    outcome_of, KINDS, "operators.taintselector"
)
