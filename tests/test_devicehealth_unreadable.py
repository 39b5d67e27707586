"""Updates the device-health controller cannot read. Its cache drops an object whose new version
does not parse, so that no pass decides on a version that has since changed; the policies whose
pass read that object must then be queued as its deletion queues them, or they go on reporting, and
tainting by, a view the cache no longer holds.
"""

from __future__ import annotations

from test_devicehealth_tombstones import CLAIM, DEVICE_CLASS, OWNED_RULE, POD, POLICY, SLICE, outcome_of
from tombstone_support import unreadable_update_test, watched

from operators.devicehealth.controller import DeviceHealthController as Controller

# A rule of someone else's is kept by name and controller only, never parsed: no update of it is
# unreadable.
KINDS = [
    watched(Controller, "policy", POLICY, "spec"),
    watched(Controller, "slice", SLICE, "spec"),
    watched(Controller, "class", DEVICE_CLASS, "spec"),
    watched(Controller, "pod", POD, "status"),
    watched(Controller, "claim", CLAIM, "status"),
    watched(Controller, "rule", OWNED_RULE, "spec"),
]

test_an_update_that_cannot_be_read_changes_what_the_deletion_does = unreadable_update_test(
    outcome_of, KINDS, "operators.devicehealth"
)
