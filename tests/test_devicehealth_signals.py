"""Signals (operators.devicehealth.signals): slice taints, the kubelet's reports, and their tracks."""

from __future__ import annotations

from devicehealth_builders import GPU, HEALTH_KEY, at, claim, device, gpu, pod, resource_slice

from operators.devicehealth.models import Pod, SliceTaintSignal
from operators.devicehealth.signals import (
    Observed,
    Track,
    kubelet_signals,
    merge_observed,
    slice_signals,
    track,
)

UNHEALTHY = frozenset({"Unhealthy"})


def test_a_slice_taint_matches_key_value_and_effect_and_starts_at_time_added() -> None:
    slices = [
        resource_slice(
            "node-1",
            device("gpu-0", unhealthy_since=at(0)),
            device("gpu-1", unhealthy_since=at(5), value="Degraded"),
            device("gpu-2", unhealthy_since=at(5), effect="NoExecute"),
            device("gpu-3"),
        )
    ]
    signal = SliceTaintSignal(key=HEALTH_KEY, values=("Unhealthy",), effects=("None", "NoSchedule"))
    assert slice_signals(signal, slices) == {gpu("node-1", "gpu-0"): Observed(started=at(0))}
    anything = SliceTaintSignal(key=HEALTH_KEY)
    assert set(slice_signals(anything, slices)) == {gpu("node-1", f"gpu-{i}") for i in range(3)}


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = resource_slice("node-1", device("gpu-0", unhealthy_since=at(0)))
    new = old.model_copy(
        update={
            "spec": old.spec.model_copy(
                update={"pool": old.spec.pool.model_copy(update={"generation": 2}), "devices": ()}
            )
        }
    )
    new = new.model_copy(update={"metadata": new.metadata.model_copy(update={"name": "other"})})
    assert slice_signals(SliceTaintSignal(key=HEALTH_KEY), [old, new]) == {}


CLAIMS = {
    ("team-a", "train-gpu-x1"): claim(
        "train-gpu-x1", ("gpu", "node-1", "gpu-0"), ("gpu", "node-1", "gpu-1"), ("nic", "node-1", "gpu-9")
    ),
    ("team-a", "single"): claim("single", ("gpu/fast", "node-1", "gpu-5")),
}


def test_a_report_names_the_pod_claim_and_the_request_and_its_resource_id_the_device() -> None:
    reporter = pod(
        "train",
        {
            "claim:gpu/gpu": [(f"{GPU}/node-1/gpu-0", "Healthy"), (f"{GPU}/node-1/gpu-1", "Unhealthy")],
            "claim:gpu/nic": [(f"{GPU}/node-1/gpu-9", "Unknown")],
        },
        claims={"gpu": "train-gpu-x1"},
    )
    assert kubelet_signals(UNHEALTHY, [reporter], CLAIMS) == {
        gpu("node-1", "gpu-1"): Observed(pods=frozenset({"team-a/train"}))
    }
    both = kubelet_signals(frozenset({"Unhealthy", "Unknown"}), [reporter], CLAIMS)
    assert set(both) == {gpu("node-1", "gpu-1"), gpu("node-1", "gpu-9")}


def test_a_cdi_id_names_the_device_only_when_the_request_has_one() -> None:
    single = pod("one", {"claim:c/gpu": [("vendor.com/gpu=5", "Unhealthy")]}, claims={"c": "single"})
    several = pod("two", {"claim:g": [("vendor.com/gpu=0", "Unhealthy")]}, claims={"g": "train-gpu-x1"})
    assert kubelet_signals(UNHEALTHY, [single, several], CLAIMS) == {
        gpu("node-1", "gpu-5"): Observed(pods=frozenset({"team-a/one"}))
    }


def test_finished_pods_unknown_claims_and_other_resources_are_no_signal() -> None:
    finished = pod(
        "done",
        {"claim:gpu/gpu": [(f"{GPU}/node-1/gpu-0", "Unhealthy")]},
        claims={"gpu": "train-gpu-x1"},
        phase="Failed",
    )
    unknown = pod("lost", {"claim:gpu/gpu": [(f"{GPU}/node-1/gpu-0", "Unhealthy")]}, claims={"gpu": "gone"})
    plugin = pod("plugin", {"example.com/gpu": [("dev-0", "Unhealthy")]})
    assert kubelet_signals(UNHEALTHY, [finished, unknown, plugin], CLAIMS) == {}


def test_a_directly_named_claim_resolves_through_the_spec() -> None:
    body = pod("direct", {"claim:mine": [(f"{GPU}/node-1/gpu-5", "Unhealthy")]}).model_dump(by_alias=True)
    body["spec"]["resourceClaims"] = [{"name": "mine", "resourceClaimName": "single"}]
    body["status"]["resourceClaimStatuses"] = []
    assert set(kubelet_signals(UNHEALTHY, [Pod.model_validate(body)], CLAIMS)) == {gpu("node-1", "gpu-5")}


def test_merged_sources_keep_the_earliest_start_and_every_pod() -> None:
    a = {gpu("n", "g"): Observed(started=at(30), pods=frozenset({"x/a"}))}
    b = {gpu("n", "g"): Observed(started=at(10), pods=frozenset({"x/b"}))}
    assert merge_observed(a, b) == {gpu("n", "g"): Observed(at(10), frozenset({"x/a", "x/b"}))}


def test_tracks_keep_the_start_until_the_signal_clears_and_quiet_from_first_sight() -> None:
    dev = gpu("n", "g")
    first = track({}, {dev: Observed()}, [], at(0))
    assert first == {dev: Track(since=at(0))}
    later = track(first, {dev: Observed()}, [], at(30))
    assert later == {dev: Track(since=at(0))}
    quiet = track(later, {}, [dev], at(40))
    assert quiet == {dev: Track(quiet_since=at(40))}
    assert track(quiet, {}, [dev], at(50)) == quiet
    # Not tainted: nothing waits for it, so it is not tracked.
    assert track(later, {}, [], at(40)) == {}
    # Signalled again: a new start.
    assert track(quiet, {dev: Observed()}, [dev], at(60)) == {dev: Track(since=at(60))}


def test_after_a_restart_a_tainted_device_is_quiet_from_first_sight_and_a_taint_keeps_its_time() -> None:
    dev, other = gpu("n", "g"), gpu("n", "h")
    rebuilt = track({}, {other: Observed(started=at(-300))}, [dev], at(0))
    assert rebuilt == {dev: Track(quiet_since=at(0)), other: Track(since=at(-300))}
