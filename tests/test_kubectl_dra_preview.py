"""``kubectl dra taint-preview``: selectors, the operator's dry-run message, and the devices, claims
and pods behind the counts (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from strategies import pod_consumer

from operators.dra.claims import ConsumerReference
from operators.dra.pools import DeviceId
from operators.dra.taints import DeviceTaint, DeviceTaintSelector
from operators.kubectl_dra.errors import UsageError
from operators.kubectl_dra.preview import consumer_pods, dry_run_report
from operators.kubectl_dra.previewmodel import (
    ClaimRow,
    Preview,
    affected_claims,
    affected_pods,
    document,
    parse_dry_run,
    parse_selector,
    published_devices,
    render,
    selector_text,
)

DRV = "dra.example.com"
NOW = datetime(2026, 9, 1, 10, 0, tzinfo=UTC)
KEY = "dra.example.com/unhealthy"


def _consumer(name: str, uid: str) -> ConsumerReference:
    """A ``reservedFor`` entry naming a pod."""
    return ConsumerReference.model_validate(pod_consumer(name, uid))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DRV, DeviceTaintSelector(driver=DRV)),
        (f"driver={DRV},pool=node-1", DeviceTaintSelector(driver=DRV, pool="node-1")),
        (" device = gpu-0 ", DeviceTaintSelector(device="gpu-0")),
        ("pool=a/b", DeviceTaintSelector(pool="a/b")),
    ],
)
def test_selectors(text: str, expected: DeviceTaintSelector) -> None:
    assert parse_selector(text) == expected


@pytest.mark.parametrize("text", ["", "colour=red", "driver=", "driver=a,driver=b", "driver=a,pool"])
def test_bad_selectors_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_selector(text)


def test_selector_text_keeps_the_api_order() -> None:
    assert selector_text(DeviceTaintSelector(device="d", driver="x")) == "driver=x,device=d"


def test_the_dry_run_report_is_the_no_effect_condition_unless_it_describes_an_older_generation() -> None:
    def rule(generation: int, **observed: int) -> dict[str, Any]:
        no_effect = {"type": "EvictionInProgress", "status": "False", "reason": "NoEffect", "message": "m"}
        return {"metadata": {"generation": generation}, "status": {"conditions": [{**no_effect, **observed}]}}

    assert dry_run_report(rule(2, observedGeneration=2)) is not None
    assert dry_run_report(rule(2, observedGeneration=1)) is None
    # A writer that does not say which generation it saw is taken at its word, as kubectl wait does:
    # the preview answers instead of waiting out its timeout.
    assert dry_run_report(rule(2)) is not None


def test_dry_run_messages() -> None:
    one = parse_dry_run(
        "3 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace "
        "if the effect was NoExecute. This information will not be updated again. Recreate the "
        "DeviceTaintRule to trigger an update. 2 pods evicted since starting the controller."
    )
    assert one is not None
    assert (one.published, one.allocated, one.pods, one.namespaces) == (3, 1, 1, 1)
    assert one.summary.endswith("in 1 namespace if the effect was NoExecute.")
    zero = parse_dry_run(
        "0 published devices selected. 0 allocated devices selected. 0 pods would be evicted in 0 different "
        "namespaces if the effect was NoExecute. This information will not be updated again."
    )
    assert zero is not None
    assert (zero.published, zero.pods, zero.namespaces) == (0, 0, 0)
    assert parse_dry_run("Eviction only happens for the NoExecute effect.") is None


def _slice(name: str, pool: str, generation: int, devices: list[str], driver: str = DRV) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": d} for d in devices],
        },
    }


def test_published_devices_come_from_the_newest_generation() -> None:
    slices = [
        _slice("old", "node-1", 1, ["gpu-0", "gpu-9"]),
        _slice("new", "node-1", 2, ["gpu-1", "gpu-0"]),
        _slice("other", "node-2", 1, ["gpu-0"]),
        _slice("foreign", "node-1", 5, ["gpu-0"], driver="other.example.com"),
    ]
    assert published_devices(slices, DeviceTaintSelector(driver=DRV, pool="node-1")) == [
        DeviceId(DRV, "node-1", "gpu-0"),
        DeviceId(DRV, "node-1", "gpu-1"),
    ]
    assert len(published_devices(slices, DeviceTaintSelector())) == 4
    assert published_devices(slices, DeviceTaintSelector(device="gpu-9")) == []


def _claim(name: str, device: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "r", "driver": DRV, "pool": "node-1", "device": device}
    if tolerations is not None:
        result["tolerations"] = tolerations
    return {
        "metadata": {"name": name, "namespace": "ns1", "uid": f"uid-{name}"},
        "status": {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [
                {"resource": "pods", "name": f"p-{name}", "uid": f"pod-{name}"},
                {"apiGroup": "example.com", "resource": "pods", "name": "not-a-pod", "uid": "w"},
            ],
        },
    }


TAINT = DeviceTaint(key=KEY, value="Broken", effect="NoExecute", time_added=NOW)


def test_eviction_honours_tolerations() -> None:
    unallocated = _claim("unallocated", "gpu-0")
    del unallocated["status"]["allocation"]
    other_pool = _claim("other-pool", "gpu-0")
    other_pool["status"]["allocation"]["devices"]["results"][0]["pool"] = "node-2"
    claims = [
        _claim("none", "gpu-0"),
        _claim("forever", "gpu-1", [{"key": KEY, "operator": "Exists", "effect": "NoExecute"}]),
        _claim("sixty", "gpu-2", [{"key": KEY, "operator": "Exists", "tolerationSeconds": 60}]),
        _claim("wrong-key", "gpu-3", [{"key": "other", "operator": "Exists"}]),
        unallocated,
        other_pool,
    ]
    rows = affected_claims(claims, DeviceTaintSelector(driver=DRV, pool="node-1"), TAINT, NOW)
    assert [(r.name, r.eviction) for r in rows] == [
        ("forever", None),
        ("none", 0.0),
        ("sixty", 60.0),
        ("wrong-key", 0.0),
    ]
    assert rows[1].consumers == (_consumer("p-none", "pod-none"),)
    assert rows[1].devices == (DeviceId(DRV, "node-1", "gpu-0"),)
    no_schedule = TAINT.model_copy(update={"effect": "NoSchedule"})
    assert {
        r.eviction for r in affected_claims(claims, DeviceTaintSelector(driver=DRV), no_schedule, NOW)
    } == {None}


def _pod(name: str, uid: str, node: str | None = "node-1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns1", "uid": uid},
        "spec": {"nodeName": node} if node else {},
    }


def _row(name: str, eviction: float | None, *consumers: ConsumerReference) -> ClaimRow:
    return ClaimRow("ns1", name, (DeviceId(DRV, "node-1", "gpu-0"),), eviction, consumers)


def test_pods_are_matched_by_uid_and_must_be_scheduled() -> None:
    claims = [
        _row("c1", 30.0, _consumer("a", "ua"), _consumer("gone", "ug")),
        _row("c2", 0.0, _consumer("a", "ua")),
        _row("c3", None, _consumer("b", "old-uid"), _consumer("c", "uc")),
    ]
    pods = {
        ("ns1", "a"): _pod("a", "ua"),
        ("ns1", "b"): _pod("b", "new-uid"),  # re-created since the claim was reserved for it
        ("ns1", "c"): _pod("c", "uc", node=None),  # not scheduled: never evicted
    }
    (pod,) = affected_pods(claims, pods)
    # The earliest eviction over the pod's claims.
    assert (pod.name, pod.node, pod.claims, pod.eviction) == ("a", "node-1", ("c1", "c2"), 0.0)


def _preview(effect: str, eviction: float | None) -> Preview:
    dry_run = parse_dry_run(
        "2 published devices selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace "
        "if the effect was NoExecute."
    )
    assert dry_run is not None
    claim = _row("c1", eviction, _consumer("p1", "u1"))
    return Preview(
        DeviceTaintSelector(driver=DRV),
        TAINT.model_copy(update={"effect": effect}),
        dry_run,
        [DeviceId(DRV, "node-1", "gpu-0"), DeviceId(DRV, "node-1", "gpu-1")],
        [claim],
        affected_pods([claim], {("ns1", "p1"): _pod("p1", "u1")}),
    )


def test_preview_table() -> None:
    assert render(_preview("NoExecute", 0.0)) == (
        "Preview of taint dra.example.com/unhealthy=Broken:NoExecute on driver=dra.example.com\n"
        "devicetaint operator (dry run): 2 published devices selected. 1 allocated device selected. "
        "1 pod would be evicted in 1 namespace if the effect was NoExecute.\n"
        "\n"
        "DRIVER           POOL    DEVICE\n"
        "dra.example.com  node-1  gpu-0\n"
        "dra.example.com  node-1  gpu-1\n"
        "\n"
        "CLAIM   DEVICES       EVICTION\n"
        "ns1/c1  node-1/gpu-0  at once\n"
        "\n"
        "POD     NODE    CLAIMS  EVICTION\n"
        "ns1/p1  node-1  c1      at once\n"
    )
    assert "ns1/p1  node-1  c1      after 90s" in render(_preview("NoExecute", 90.0))
    assert "ns1/p1  node-1  c1      never (tolerated)" in render(_preview("NoExecute", None))
    no_schedule = render(_preview("NoSchedule", None))
    assert "With effect NoSchedule no pod is evicted: the devices only stop taking new claims." in no_schedule
    assert "ns1/p1  node-1  c1      none (NoSchedule)" in no_schedule


def test_preview_document() -> None:
    doc = document(_preview("NoExecute", 90.0))
    assert doc["selector"] == {"driver": DRV}
    assert doc["taint"] == {"key": KEY, "value": "Broken", "effect": "NoExecute"}
    assert doc["dryRun"] == {
        "publishedDevices": 2,
        "allocatedDevices": 1,
        "pods": 1,
        "namespaces": 1,
        "message": "2 published devices selected. 1 allocated device selected. 1 pod would be evicted in "
        "1 namespace if the effect was NoExecute.",
    }
    assert doc["claims"] == [
        {
            "namespace": "ns1",
            "name": "c1",
            "devices": [{"driver": DRV, "pool": "node-1", "device": "gpu-0"}],
            "evictionAfterSeconds": 90.0,
        }
    ]
    assert doc["pods"] == [
        {
            "namespace": "ns1",
            "name": "p1",
            "nodeName": "node-1",
            "claims": ["c1"],
            "evictionAfterSeconds": 90.0,
        }
    ]


async def test_a_reserved_name_no_pod_can_have_is_not_requested() -> None:
    """reservedFor takes any name: pasted into a path, ``.`` would list every pod of the namespace."""
    requested: list[str] = []

    class Client:
        async def get(self, path: str) -> dict[str, Any]:
            requested.append(path)
            return _pod("a", "ua")

    session: Any = type("Session", (), {"client": Client()})()
    claims = [_row("c1", 0.0, _consumer("a", "ua"), _consumer(".", "x"), _consumer("a/status", "y"))]
    pods = await consumer_pods(session, claims)
    assert requested == ["/api/v1/namespaces/ns1/pods/a"]
    assert list(pods) == [("ns1", "a")]
