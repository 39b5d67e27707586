from __future__ import annotations

import asyncio
import json
import math
import threading
from typing import Any

import pytest
from bindingattacher_builders import CLAIM_UID, FABRIC, attach_request, claim, record, result

from operators.bindingattacher.actions import calls
from operators.bindingattacher.actions.base import AttachResult, Operation, Outcome, PermanentActionError
from operators.bindingattacher.actions.calls import invoke
from operators.bindingattacher.calls import build_request
from operators.bindingattacher.models import ActionDevice, DetachReason, DeviceAttachmentStatus, Node, Phase
from operators.core import wirejson
from operators.dra.pools import published_device


def test_request_document_matches_the_spec_shape() -> None:
    doc = calls.request_document(attach_request())
    assert doc["apiVersion"] == "dra-operators.io/v1alpha1"
    assert doc["kind"] == "AttachRequest"
    assert doc["operation"] == "Attach"
    assert doc["attachmentKey"].startswith("da-")
    assert doc["attempt"] == 1
    assert doc["deadline"] == "2026-08-01T10:00:22Z"
    assert doc["allocationTimestamp"] == "2026-08-01T10:00:00Z"
    assert doc["claim"] == {"namespace": "team-a", "name": "trainer-0-gpu", "uid": CLAIM_UID, "generation": 1}
    assert doc["device"]["driver"] == FABRIC
    assert doc["device"]["name"] == "f0"
    assert doc["device"]["shareID"] is None
    assert doc["device"]["attributes"] is None
    assert doc["node"]["name"] == "node-a"
    assert doc["node"]["source"] == "Allocation"
    assert doc["consumers"] == [{"namespace": "team-a", "name": "pod-0", "uid": "pod-uid-1"}]
    assert doc["policy"] == {"name": "fabric", "generation": 3}
    assert doc["previousData"] is None
    assert doc["detachReason"] is None
    json.dumps(doc)  # serializable as is


def test_detach_request_carries_previous_data_and_reason() -> None:
    status = DeviceAttachmentStatus(
        phase=Phase.DETACHING,
        attempts=1,
        detach_attempts=2,
        data={"port": 7},
        detach_reason=DetachReason.CLAIM_DELETED,
    )
    node = Node.model_validate(
        {
            "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}},
            "spec": {"providerID": "fake://node-a"},
            "status": {"nodeInfo": {"systemUUID": "uuid-a"}},
        }
    )
    device = ActionDevice(name="f0", binds_to_node=True, attributes={"model": {"string": "x"}})
    request = build_request(
        Operation.DETACH, record(status=status), timeout_seconds=60, node=node, device=device
    )
    doc = calls.request_document(request)
    assert doc["deadline"] is None
    assert doc["attempt"] == 2
    assert doc["previousData"] == {"port": 7}
    assert doc["detachReason"] == "ClaimDeleted"
    assert doc["node"] == {
        "name": "node-a",
        "source": "Allocation",
        "providerID": "fake://node-a",
        "systemUUID": "uuid-a",
        "labels": {"kubernetes.io/hostname": "node-a"},
    }
    assert doc["device"]["bindsToNode"] is True
    assert doc["device"]["attributes"] == {"model": {"string": "x"}}
    assert doc["consumers"] == []  # the claim is gone


def test_published_device_reads_the_newest_pool_generation() -> None:
    from operators.bindingattacher.models import ResourceSlice

    def slice_(generation: int, devices: list[dict[str, Any]]) -> ResourceSlice:
        return ResourceSlice.model_validate(
            {
                "metadata": {"name": f"s{generation}"},
                "spec": {
                    "driver": FABRIC,
                    "pool": {"name": "fabric-pool", "generation": generation},
                    "devices": devices,
                },
            }
        )

    slices = [
        slice_(1, [{"name": "f0", "bindsToNode": False}]),
        slice_(2, [{"name": "f0", "bindsToNode": True}]),
    ]
    found = published_device(slices, FABRIC, "fabric-pool", "f0")
    assert found is not None
    assert found.binds_to_node is True
    assert published_device(slices, FABRIC, "fabric-pool", "f9") is None
    assert published_device(slices, FABRIC, "other", "f0") is None


def test_test_annotations_reach_the_request_only_when_enabled() -> None:
    the_claim = claim(
        [result("f0")], annotations={"test.dra-operators.io/attach-outcome": "Fail", "other": "x"}
    )
    with_annotations = build_request(
        Operation.ATTACH, record(the_claim), timeout_seconds=1, claim=the_claim, with_test_annotations=True
    )
    assert dict(with_annotations.claim.annotations) == {"test.dra-operators.io/attach-outcome": "Fail"}
    assert "annotations" not in calls.request_document(with_annotations)["claim"]
    without = build_request(Operation.ATTACH, record(the_claim), timeout_seconds=1, claim=the_claim)
    assert dict(without.claim.annotations) == {}


def test_response_parsing() -> None:
    ok = calls.parse_response_bytes(b'{"outcome": "Succeeded", "message": "done", "data": {"port": 7}}')
    assert ok.result == AttachResult(Outcome.SUCCEEDED, "done", {"port": 7})
    assert calls.parse_response_bytes(b"").result.outcome is Outcome.SUCCEEDED
    assert calls.parse_response_bytes(b"{}").result.outcome is Outcome.SUCCEEDED
    bad_json = calls.parse_response_bytes(b"{not json")
    assert bad_json.result.outcome is Outcome.TRANSIENT_ERROR
    assert "invalid JSON" in bad_json.result.message
    assert calls.parse_response_bytes(b'{"outcome": "Maybe"}').result.outcome is Outcome.TRANSIENT_ERROR
    assert calls.parse_response_bytes(b"[1]").result.outcome is Outcome.TRANSIENT_ERROR
    retry = calls.parse_response_bytes(b'{"outcome": "InProgress", "retryAfterSeconds": 3}')
    assert retry.result.retry_after_seconds == 3
    long = calls.parse_response({"message": "m" * 3000})
    assert len(long.result.message) == 1024
    big = calls.parse_response({"data": {"blob": "x" * 9000}})
    assert big.result.data is None
    assert big.warnings
    assert "8192" in big.warnings[0]
    not_object = calls.parse_response({"data": [1, 2]})
    assert not_object.result.data is None


NOT_JSON_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400]
"""The last: kube-apiserver reads a device status's data into float64s, and refuses it."""


@pytest.mark.parametrize("number", NOT_JSON_NUMBERS)
@pytest.mark.parametrize(
    "template",
    [
        '{"outcome": "Succeeded", "data": {"x": %s}}',
        '{"outcome": "Succeeded", "data": {"deep": [{"x": %s}]}}',
        '{"outcome": "InProgress", "retryAfterSeconds": %s}',
        '{"outcome": "Succeeded", "extra": %s}',
    ],
)
def test_a_number_json_cannot_carry_is_an_invalid_response(template: str, number: str) -> None:
    """Python reads these; the claim status write carrying one could never be sent."""
    parsed = calls.parse_response_bytes((template % number).encode())
    assert parsed.result.outcome is Outcome.TRANSIENT_ERROR
    assert parsed.result.message.startswith("invalid JSON in response: ")
    assert number in parsed.result.message
    assert (parsed.result.data, parsed.result.retry_after_seconds) == (None, None)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_data_an_in_process_action_returns_is_kept_only_if_the_client_can_write_it(value: float) -> None:
    parsed = calls.normalize(AttachResult(Outcome.SUCCEEDED, "done", {"port": 7, "load": [value]}))
    assert parsed.result.outcome is Outcome.SUCCEEDED
    assert parsed.result.data is None
    assert "not JSON-serializable" in parsed.warnings[0]


def test_data_is_measured_as_the_client_writes_it() -> None:
    """Go writes ``é`` as two bytes and ``<`` as six; that is what the status carries."""
    kept = {"s": "é" * 4000}
    assert calls.check_data(kept) == (kept, None)
    dropped, warning = calls.check_data({"s": "<" * 1400})
    assert dropped is None
    assert warning is not None
    assert "8192" in warning
    assert len(wirejson.dumps(kept).encode()) <= calls.MAX_DATA_BYTES


class Callables:
    def __init__(self) -> None:
        self.thread: str = ""

    async def attach(self, request: Any) -> AttachResult:
        raise PermanentActionError("incompatible device")

    async def detach(self, request: Any) -> AttachResult:
        raise RuntimeError("backend down")

    async def probe(self, request: Any) -> Any:
        return {"outcome": "InProgress", "retryAfterSeconds": 2}


class SyncAction:
    def __init__(self) -> None:
        self.thread = ""

    def attach(self, request: Any) -> AttachResult:
        self.thread = threading.current_thread().name
        return AttachResult(Outcome.SUCCEEDED)

    def detach(self, request: Any) -> str:
        return "not a result"


class SlowAction:
    cancelled = False

    async def attach(self, request: Any) -> AttachResult:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            SlowAction.cancelled = True
            raise
        return AttachResult(Outcome.SUCCEEDED)

    async def detach(self, request: Any) -> AttachResult:
        return AttachResult(Outcome.SUCCEEDED)


async def test_invoke_maps_exceptions_and_returns() -> None:
    request = attach_request()
    permanent = await invoke(Callables(), Operation.ATTACH, request, 5)
    assert (permanent.result.outcome, permanent.result.message) == (
        Outcome.PERMANENT_ERROR,
        "incompatible device",
    )
    assert permanent.metric_result == "permanent_error"
    transient = await invoke(Callables(), Operation.DETACH, request, 5)
    assert transient.result.outcome is Outcome.TRANSIENT_ERROR
    assert transient.result.message == "RuntimeError: backend down"
    probe = await invoke(Callables(), Operation.PROBE, request, 5)
    assert (probe.result.outcome, probe.result.retry_after_seconds) == (Outcome.IN_PROGRESS, 2)


async def test_invoke_runs_plain_functions_in_a_thread_and_falls_back_from_probe() -> None:
    action = SyncAction()
    outcome = await invoke(action, Operation.PROBE, attach_request(), 5)  # no probe: attach
    assert outcome.result.outcome is Outcome.SUCCEEDED
    assert action.thread != threading.main_thread().name
    wrong = await invoke(action, Operation.DETACH, attach_request(), 5)
    assert wrong.result.outcome is Outcome.TRANSIENT_ERROR
    assert "not AttachResult" in wrong.result.message


async def test_invoke_cancels_on_timeout() -> None:
    outcome = await invoke(SlowAction(), Operation.ATTACH, attach_request(), 0.05)
    assert outcome.timed_out
    assert outcome.result.outcome is Outcome.TRANSIENT_ERROR
    assert outcome.metric_result == "timeout"
    assert SlowAction.cancelled
