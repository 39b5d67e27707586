"""Updates the taint-selector controller cannot read. Its cache drops an object whose new version
does not parse, so that no pass decides on a version that has since changed; the selectors whose
pass read that object must then be queued as its deletion queues them, or they go on reporting, and
tainting by, a view the cache no longer holds. So an update that cannot be read must change what
the deletion of the object changes, and still say in the log which object was skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from test_taintselector_tombstones import (
    CLAIM,
    DEVICE_CLASS,
    NAMESAKE,
    OWNED_RULE,
    SELECTOR_BODY,
    SLICE,
    outcome_of,
)

from operators.taintselector.controller import TaintSelectorController

Event = Callable[[TaintSelectorController, Mapping[str, Any]], None]

KINDS = [
    pytest.param(
        TaintSelectorController.upsert_selector,
        TaintSelectorController.delete_selector,
        SELECTOR_BODY,
        "spec",
        id="selector",
    ),
    pytest.param(
        TaintSelectorController.upsert_slice, TaintSelectorController.delete_slice, SLICE, "spec", id="slice"
    ),
    pytest.param(
        TaintSelectorController.upsert_class,
        TaintSelectorController.delete_class,
        DEVICE_CLASS,
        "spec",
        id="class",
    ),
    pytest.param(
        TaintSelectorController.upsert_claim,
        TaintSelectorController.delete_claim,
        CLAIM,
        "status",
        id="claim",
    ),
    pytest.param(
        TaintSelectorController.upsert_rule,
        TaintSelectorController.delete_rule,
        OWNED_RULE,
        "spec",
        id="rule",
    ),
    pytest.param(
        TaintSelectorController.upsert_rule,
        TaintSelectorController.delete_rule,
        NAMESAKE,
        "spec",
        id="rule-of-someone-else",
    ),
]


@pytest.mark.parametrize(("update", "delete", "body", "broken"), KINDS)
async def test_an_update_that_cannot_be_read_changes_what_the_deletion_does(
    update: Event, delete: Event, body: dict[str, Any], broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    deleted = await outcome_of(delete, body)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="operators.taintselector"):
        unreadable = await outcome_of(update, {**body, broken: "not an object"})
    assert unreadable == deleted
    skipped = [record.getMessage() for record in caplog.records if "cannot be parsed" in record.getMessage()]
    assert len(skipped) == 1
    assert body["metadata"]["name"] in skipped[0]
