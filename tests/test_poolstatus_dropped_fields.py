"""A status the API server kept only in part: 1.36's built-in ``v1alpha3`` has no summaries and
drops them without an error (unknown fields only warn), an outdated CRD prunes them. The loss is
found in the write's answer, reported once, and never written again."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from operators.core.discovery import ServedResource
from operators.core.events import ObjectRef
from operators.core.runtime import Runtime
from operators.core.workqueue import WorkQueue
from operators.poolstatus import messages
from operators.poolstatus.controller import PoolStatusController, request_key
from operators.poolstatus.settings import Settings
from operators.poolstatus.surfaces import BUILTIN, PROJECT, SURFACES, Surface
from operators.poolstatus.writes import dropped_fields

pytestmark = pytest.mark.unit

DRIVER = "nic.example.com"
SUMMARIES = ("partitionSummary", "shareableSummary")


def pool(**extra: Any) -> dict[str, Any]:
    return {
        "driver": DRIVER,
        "poolName": "p",
        "generation": 1,
        "resourceSliceCount": 1,
        "totalDevices": 2,
        "allocatedDevices": 0,
        "availableDevices": 2,
        "unavailableDevices": 0,
        **extra,
    }


SHAREABLE = {
    "fullyAvailableDevices": 2,
    "partiallyAvailableDevices": 0,
    "capacity": [{"name": f"{DRIVER}/bandwidth", "total": "20Gi", "consumed": "0", "available": "20Gi"}],
}
PARTITIONS = [{"attribute": f"{DRIVER}/profile", "type": "Half", "total": 2, "allocatable": 2}]
CONDITIONS = [{"type": "Complete", "status": "True", "reason": "CalculationComplete", "message": "m"}]


def without(status: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``status`` as a server that does not know ``keys`` of a pool returns it."""
    kept = copy.deepcopy(status)
    for entry in kept.get("pools", []):
        for key in keys:
            entry.pop(key, None)
    return kept


# -- the pure comparison -------------------------------------------------------------------------


def test_summaries_dropped_by_1_36_are_named_once_whatever_the_pool_count() -> None:
    written = {
        "poolCount": 3,
        "pools": [pool(shareableSummary=SHAREABLE), pool(partitionSummary=PARTITIONS), pool()],
        "conditions": CONDITIONS,
    }
    assert dropped_fields(written, without(written, *SUMMARIES)) == (
        "pools[].partitionSummary",
        "pools[].shareableSummary",
    )


def test_a_status_kept_whole_or_only_normalised_lost_nothing() -> None:
    written: dict[str, Any] = {
        "poolCount": 1,
        "pools": [pool(shareableSummary=SHAREABLE)],
        "conditions": CONDITIONS,
    }
    assert dropped_fields(written, copy.deepcopy(written)) == ()
    normalised = copy.deepcopy(written)
    normalised["pools"][0]["shareableSummary"]["capacity"][0]["total"] = "21474836480"
    normalised["conditions"][0]["lastTransitionTime"] = "2026-09-01T10:00:00Z"
    assert dropped_fields(written, normalised) == ()


def test_empty_values_left_out_of_the_answer_are_no_loss() -> None:
    """Go's omitempty leaves them out of every answer, dropped or not."""
    written = {"poolCount": 0, "pools": [pool(nodeName="", validationError=None, partitionSummary=[])]}
    answer = {"pools": [{k: v for k, v in pool().items() if v != 0}]}
    assert dropped_fields(written, answer) == ()


def test_a_field_dropped_deep_inside_is_named_by_its_path() -> None:
    written = {"pools": [pool(shareableSummary=SHAREABLE)]}
    answer = copy.deepcopy(written)
    del answer["pools"][0]["shareableSummary"]["capacity"][0]["consumed"]
    assert dropped_fields(written, answer) == ("pools[].shareableSummary.capacity[].consumed",)


def test_no_answer_or_lists_of_another_length_prove_nothing() -> None:
    written = {"pools": [pool(shareableSummary=SHAREABLE)]}
    assert dropped_fields(written, None) == ()
    assert dropped_fields(written, "") == ()
    assert dropped_fields(written, {"pools": []}) == ()
    assert dropped_fields(written, {}) == ("pools",)


json_scalars = st.one_of(st.integers(min_value=1), st.text(min_size=1), st.just(True))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(st.text(min_size=1, max_size=5), inner, min_size=1, max_size=3),
    ),
    max_leaves=12,
)
statuses = st.dictionaries(st.text(min_size=1, max_size=5), json_values, min_size=1, max_size=4)


@given(statuses)
def test_an_echoed_status_lost_nothing(written: dict[str, Any]) -> None:
    assert dropped_fields(written, copy.deepcopy(written)) == ()


@given(statuses, st.data())
def test_a_removed_top_level_field_is_exactly_what_is_named(
    written: dict[str, Any], data: st.DataObject
) -> None:
    removed = data.draw(st.sampled_from(sorted(written)))
    answer = {k: v for k, v in written.items() if k != removed}
    assert dropped_fields(written, answer) == (removed,)


def test_the_message_names_the_fields_the_cause_and_the_remedy() -> None:
    fields = ("pools[].partitionSummary", "pools[].shareableSummary")
    built_in = messages.status_fields_dropped_message(BUILTIN.api_version, fields, built_in=True)
    assert built_in.startswith(
        "The API server dropped status.pools[].partitionSummary, status.pools[].shareableSummary "
    )
    assert "resource.k8s.io/v1alpha3" in built_in
    assert "Kubernetes 1.36" in built_in
    assert "dra-operators.io/v1alpha1" in built_in
    crd = messages.status_fields_dropped_message(PROJECT.api_version, fields[1:], built_in=False)
    assert "prunes" in crd
    assert "crds/resourcepoolstatusrequests.dra-operators.io.yaml" in crd
    assert len(built_in.encode()) <= messages.MAX_CONDITION_MESSAGE_BYTES


# -- the controller: reported once, never written again -----------------------------------------


@dataclass
class ForgetfulServer:
    """Answers every status patch as 1.36's built-in API does: without the summaries."""

    writes: list[dict[str, Any]] = field(default_factory=list)

    async def patch(self, path: str, body: Any, content_type: str = "", **_: str) -> Any:
        self.writes.append(body)
        return {"metadata": {"name": path.split("/")[-2]}, "status": without(body["status"], *SUMMARIES)}

    async def request(self, method: str, path: str, *, body: Any, want_reply: bool = True, **_: Any) -> Any:
        """The executor's way to patch."""
        assert method == "PATCH", method
        answer = await self.patch(path, body)
        return answer if want_reply else None


@dataclass
class RecordedEvents:
    recorded: list[tuple[ObjectRef, str, str, str]] = field(default_factory=list)

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.recorded.append((obj, type_, reason, message))


def both_surfaces() -> dict[tuple[str, str], ServedResource | None]:
    """What the runtime finds where both surfaces serve requests and their status."""
    return {
        (s.group, s.plural): ServedResource(
            s.group, s.version, s.plural, False, subresources=frozenset({"status"})
        )
        for s in SURFACES
    }


@dataclass
class FakeRuntime:
    settings: Settings
    client: ForgetfulServer
    events: RecordedEvents = field(default_factory=RecordedEvents)
    queue: WorkQueue[Any] = field(default_factory=lambda: WorkQueue("poolstatus-dropped-unit"))
    served: dict[tuple[str, str], ServedResource | None] = field(default_factory=both_surfaces)

    def request_stop(self, exit_code: int = 0) -> None:
        raise AssertionError(f"unexpected stop {exit_code}")


def request_body(name: str, **status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "7"},
        "spec": {"driver": DRIVER, "limit": 100},
    }
    if status:
        body["status"] = status
    return body


def shareable_slice() -> dict[str, Any]:
    devices = [
        {"name": f"nic-{i}", "allowMultipleAllocations": True, "capacity": {"bandwidth": {"value": "10Gi"}}}
        for i in range(2)
    ]
    return {
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def dropped_total(surface: Surface) -> float:
    labels = {"group": surface.group, "field": "pools[].shareableSummary"}
    return REGISTRY.get_sample_value("dra_operators_poolstatus_status_fields_dropped_total", labels) or 0.0


async def test_dropped_summaries_are_reported_once_and_never_written_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ForgetfulServer()
    runtime = FakeRuntime(Settings(device_taint_rules="off"), server)
    controller = PoolStatusController(cast(Runtime, runtime))
    assert await controller.prepare()
    controller.upsert_slice(shareable_slice())
    before = dropped_total(BUILTIN)

    with caplog.at_level(logging.WARNING, logger="operators.poolstatus.controller"):
        for name in ("first", "second"):
            controller.upsert_request(BUILTIN, request_body(name))
            await controller.sync(request_key((BUILTIN.group, name)))

    assert [w["status"]["pools"][0]["shareableSummary"]["fullyAvailableDevices"] for w in server.writes] == [
        2,
        2,
    ]
    # One Warning Event on each request, naming the field and the likely cause...
    assert [
        (ref.name, ref.api_version, ref.kind, type_, reason)
        for ref, type_, reason, _ in runtime.events.recorded
    ] == [
        ("first", "resource.k8s.io/v1alpha3", "ResourcePoolStatusRequest", "Warning", "StatusFieldsDropped"),
        ("second", "resource.k8s.io/v1alpha3", "ResourcePoolStatusRequest", "Warning", "StatusFieldsDropped"),
    ]
    assert "status.pools[].shareableSummary" in runtime.events.recorded[0][3]
    assert "Kubernetes 1.36" in runtime.events.recorded[0][3]
    # ...one WARNING line for the process, and the metric per request.
    dropped_lines = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped_lines) == 1
    assert "pools[].shareableSummary" in dropped_lines[0].getMessage()
    assert dropped_total(BUILTIN) == before + 2

    # The watch then shows the status without the summaries: answered, so nothing is compared
    # with it and nothing is written again, on a re-sync or a slice event alike.
    for name in ("first", "second"):
        status = without(server.writes[0]["status"], *SUMMARIES)
        controller.upsert_request(BUILTIN, request_body(name, **status))
        await controller.sync(request_key((BUILTIN.group, name)))
    controller.upsert_slice(shareable_slice())
    assert len(server.writes) == 2
    assert controller.pending_counts()[BUILTIN.group] == 0
