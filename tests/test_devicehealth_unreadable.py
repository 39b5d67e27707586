"""Updates the device-health controller cannot read. Its cache drops an object whose new version
does not parse, so that no pass decides on a version that has since changed; the policies whose
pass read that object must then be queued as its deletion queues them, or they go on reporting, and
tainting by, a view the cache no longer holds. So an update that cannot be read must change what
the deletion of the object changes, and still say in the log which object was skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from test_devicehealth_tombstones import CLAIM, DEVICE_CLASS, OWNED_RULE, POD, POLICY, SLICE, outcome_of

from operators.devicehealth.controller import DeviceHealthController

Event = Callable[[DeviceHealthController, Mapping[str, Any]], None]

# A rule of someone else's is kept by name and controller only, never parsed: no update of it is
# unreadable.
KINDS = [
    pytest.param(
        DeviceHealthController.upsert_policy,
        DeviceHealthController.delete_policy,
        POLICY,
        "spec",
        id="policy",
    ),
    pytest.param(
        DeviceHealthController.upsert_slice, DeviceHealthController.delete_slice, SLICE, "spec", id="slice"
    ),
    pytest.param(
        DeviceHealthController.upsert_class,
        DeviceHealthController.delete_class,
        DEVICE_CLASS,
        "spec",
        id="class",
    ),
    pytest.param(
        DeviceHealthController.upsert_pod, DeviceHealthController.delete_pod, POD, "status", id="pod"
    ),
    pytest.param(
        DeviceHealthController.upsert_claim, DeviceHealthController.delete_claim, CLAIM, "status", id="claim"
    ),
    pytest.param(
        DeviceHealthController.upsert_rule, DeviceHealthController.delete_rule, OWNED_RULE, "spec", id="rule"
    ),
]


@pytest.mark.parametrize(("update", "delete", "body", "broken"), KINDS)
async def test_an_update_that_cannot_be_read_changes_what_the_deletion_does(
    update: Event, delete: Event, body: dict[str, Any], broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    deleted = await outcome_of(delete, body)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="operators.devicehealth"):
        unreadable = await outcome_of(update, {**body, broken: "not an object"})
    assert unreadable == deleted
    skipped = [record.getMessage() for record in caplog.records if "cannot be parsed" in record.getMessage()]
    assert len(skipped) == 1
    assert body["metadata"]["name"] in skipped[0]
