"""The watch cache, its lookup maps and event routing (spec sections 3, 5 and 7.3)."""

from __future__ import annotations

from resourceclaim_builders import (
    FakeClock,
    cache_with,
    make_claim,
    make_pod,
    make_template,
    named_entry,
    pod_consumer,
    template_entry,
)

from operators.core.keys import CLAIM, POD, Key
from operators.resourceclaim.cache import ClusterCache
from operators.resourceclaim.models import ResourceClaim


def test_pod_event_indexes_claims_and_templates() -> None:
    cache = ClusterCache(clock=FakeClock())
    pod = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl"), named_entry("nic", "shared"), template_entry("new", "t2")],
        statuses=[{"name": "gpu", "resourceClaimName": "my-pod-gpu-abcde"}],
    )
    assert cache.apply_pod_event("ADDED", pod) == [Key(POD, "demo", "my-pod")]
    assert cache.pod("demo", "my-pod") == pod
    assert cache.pods_using_claim("demo", "my-pod-gpu-abcde") == {"demo/my-pod"}
    assert cache.pods_using_claim("demo", "shared") == {"demo/my-pod"}
    assert cache.pods_using_template("demo", "gpu-tmpl") == {"demo/my-pod"}
    assert cache.pods_using_template("demo", "t2") == {"demo/my-pod"}


def test_pod_update_reindexes_new_status_names() -> None:
    cache = ClusterCache(clock=FakeClock())
    cache.apply_pod_event("ADDED", make_pod(claims=[template_entry("gpu", "gpu-tmpl")]))
    updated = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl")], statuses=[{"name": "gpu", "resourceClaimName": "c2"}]
    )
    cache.apply_pod_event("MODIFIED", updated)
    assert cache.pods_using_claim("demo", "c2") == {"demo/my-pod"}
    cache.apply_pod_event("DELETED", updated)
    assert cache.pod("demo", "my-pod") is None
    assert cache.pods_using_claim("demo", "c2") == frozenset()
    assert cache.pods_using_template("demo", "gpu-tmpl") == frozenset()


def test_pods_without_claims_are_not_kept_nor_remembered() -> None:
    cache = ClusterCache(clock=FakeClock())
    plain = make_pod("plain", "P")
    assert cache.apply_pod_event("ADDED", plain) == []
    assert cache.pod("demo", "plain") is None
    assert cache.apply_pod_event("DELETED", plain) == []
    assert not cache.is_deleted_consumer("P")


def test_deleted_pod_is_remembered_and_routes_its_claims() -> None:
    pod = make_pod(claims=[named_entry("gpu", "shared")], node_name="node-1", phase="Running")
    cache = cache_with(pods=[pod])
    assert cache.apply_pod_event("DELETED", pod) == [Key(CLAIM, "demo", "shared")]
    assert cache.is_deleted_consumer("U")


def test_deleted_event_of_a_replaced_pod_keeps_the_new_pod() -> None:
    old = make_pod("web-0", "U1", claims=[named_entry("gpu", "shared")])
    new = make_pod("web-0", "U2", claims=[named_entry("gpu", "shared")])
    cache = cache_with(pods=[new])
    cache.apply_pod_event("DELETED", old)
    assert cache.pod("demo", "web-0") == new
    assert cache.is_deleted_consumer("U1")


def test_deleted_pod_memory_keeps_the_500_most_recent() -> None:
    cache = ClusterCache(clock=FakeClock())
    for index in range(501):
        cache.apply_pod_event(
            "DELETED", make_pod(f"p{index}", f"uid-{index}", claims=[named_entry("g", "c")])
        )
    assert not cache.is_deleted_consumer("uid-0")
    assert cache.is_deleted_consumer("uid-1")
    assert cache.is_deleted_consumer("uid-500")


def test_claim_event_enqueues_claim_and_reroutes_its_pods() -> None:
    pod = make_pod(uid="U", claims=[named_entry("gpu", "shared")], node_name="node-1")
    cache = cache_with(pods=[pod])
    allocated = make_claim("shared", allocated=True)
    assert cache.apply_claim_event("ADDED", allocated) == [
        Key(CLAIM, "demo", "shared"),
        Key(POD, "demo", "my-pod"),
    ]
    reserved = make_claim("shared", allocated=True, reserved_for=[pod_consumer("my-pod", "U")])
    assert cache.apply_claim_event("MODIFIED", reserved) == [Key(CLAIM, "demo", "shared")]


def test_deleted_claim_is_not_enqueued_but_its_pods_are_rerouted() -> None:
    pod = make_pod(
        claims=[template_entry("gpu", "gpu-tmpl")], statuses=[{"name": "gpu", "resourceClaimName": "c"}]
    )
    claim = make_claim("c", owner=("my-pod", "U"), entry="gpu")
    cache = cache_with(pods=[pod], claims=[claim])
    assert cache.apply_claim_event("DELETED", claim) == [Key(POD, "demo", "my-pod")]
    assert cache.claim("demo", "c") is None
    assert cache.find_generated_claim("demo", "U", "gpu") is None


def test_template_event_reroutes_waiting_pods() -> None:
    # Scenario 29: a pod waiting for its template is enqueued as soon as the template exists.
    pod = make_pod(claims=[template_entry("gpu", "gpu-tmpl")])
    cache = cache_with(pods=[pod])
    assert cache.apply_template_event("ADDED", make_template()) == [Key(POD, "demo", "my-pod")]
    assert cache.template("demo", "gpu-tmpl") is not None
    assert cache.apply_template_event("DELETED", make_template()) == []
    assert cache.template("demo", "gpu-tmpl") is None


def test_initial_listing_has_no_event_type() -> None:
    cache = ClusterCache(clock=FakeClock())
    assert cache.apply_claim_event(None, make_claim("c")) == [Key(CLAIM, "demo", "c")]
    assert cache.claim("demo", "c") is not None


# 7.3: finding an existing generated claim.


def generated(name: str, uid: str, entry: str | None, created: str, owner_uid: str = "U") -> ResourceClaim:
    return make_claim(name, uid, owner=("my-pod", owner_uid), entry=entry, created=created)


def test_find_generated_claim_matches_owner_and_annotation() -> None:
    cache = cache_with(
        claims=[
            generated("a", "A", "gpu", "2026-01-01T00:00:00Z"),
            generated("b", "B", "nic", "2026-01-01T00:00:00Z"),
            generated("c", "C", None, "2026-01-01T00:00:00Z"),
            generated("d", "D", "gpu", "2026-01-01T00:00:00Z", owner_uid="OTHER"),
        ]
    )
    found = cache.find_generated_claim("demo", "U", "gpu")
    assert found is not None
    assert found.name == "a"
    assert cache.find_generated_claim("demo", "U", "missing") is None
    assert cache.find_generated_claim("elsewhere", "U", "gpu") is None


def test_find_generated_claim_prefers_oldest_then_smallest_name() -> None:
    cache = cache_with(
        claims=[
            generated("z-new", "Z", "gpu", "2026-01-01T00:00:09Z"),
            generated("m-old", "M", "gpu", "2026-01-01T00:00:01Z"),
            generated("b-old", "B", "gpu", "2026-01-01T00:00:01Z"),
        ]
    )
    found = cache.find_generated_claim("demo", "U", "gpu")
    assert found is not None
    assert found.name == "b-old"


def test_just_created_record_bridges_the_watch_lag() -> None:
    cache = ClusterCache(clock=FakeClock())
    claim = generated("my-pod-gpu-bcdfg", "C1", "gpu", "2026-01-01T00:00:00Z")
    cache.record_created(claim)
    assert cache.find_generated_claim("demo", "U", "gpu") == claim
    cache.apply_claim_event("ADDED", claim)
    assert cache.just_created_count() == 0
    assert cache.find_generated_claim("demo", "U", "gpu") == claim


def test_just_created_record_is_dropped_on_the_claim_deletion() -> None:
    cache = ClusterCache(clock=FakeClock())
    claim = generated("my-pod-gpu-bcdfg", "C1", "gpu", "2026-01-01T00:00:00Z")
    cache.record_created(claim)
    cache.apply_claim_event("DELETED", claim)
    assert cache.just_created_count() == 0


def test_record_is_skipped_when_the_watch_was_faster() -> None:
    claim = generated("my-pod-gpu-bcdfg", "C1", "gpu", "2026-01-01T00:00:00Z")
    cache = cache_with(claims=[claim])
    cache.record_created(claim)
    assert cache.just_created_count() == 0


def test_unconfirmed_record_is_checked_after_60_seconds() -> None:
    clock = FakeClock()
    cache = ClusterCache(clock=clock)
    claim = generated("my-pod-gpu-bcdfg", "C1", "gpu", "2026-01-01T00:00:00Z")
    cache.record_created(claim)
    clock.now += 59.9
    assert cache.unconfirmed_created_claims() == []
    clock.now += 0.1
    assert cache.unconfirmed_created_claims() == [claim]

    cache.confirm_created("C1", "C1")
    assert cache.unconfirmed_created_claims() == []
    clock.now += 60
    assert cache.unconfirmed_created_claims() == [claim]

    cache.confirm_created("C1", "SOMEONE-ELSE")
    assert cache.just_created_count() == 0
    assert cache.find_generated_claim("demo", "U", "gpu") is None


def test_unconfirmed_record_is_removed_on_404() -> None:
    clock = FakeClock()
    cache = ClusterCache(clock=clock)
    cache.record_created(generated("my-pod-gpu-bcdfg", "C1", "gpu", "2026-01-01T00:00:00Z"))
    clock.now += 61
    cache.confirm_created("C1", None)
    assert cache.just_created_count() == 0


def test_claims_iterates_over_a_snapshot() -> None:
    cache = cache_with(claims=[make_claim("a"), make_claim("b")])
    names = []
    for claim in cache.claims():
        names.append(claim.name)
        cache.apply_claim_event("DELETED", claim)
    assert sorted(names) == ["a", "b"]


def test_known_claim_is_the_held_object_of_that_exact_version() -> None:
    cache = ClusterCache(clock=FakeClock())
    created = generated("my-pod-gpu-bcdfg", "C1", "gpu", "2026-01-01T00:00:00Z")
    version = created.metadata.resource_version
    assert version
    # Our own create, before the watch has delivered it.
    cache.record_created(created)
    assert cache.known_claim("demo", "my-pod-gpu-bcdfg", "C1", version) is created
    cache.apply_claim_event("ADDED", created)
    assert cache.known_claim("demo", "my-pod-gpu-bcdfg", "C1", version) is created

    assert cache.known_claim("demo", "my-pod-gpu-bcdfg", "C1", "other-version") is None
    assert cache.known_claim("demo", "my-pod-gpu-bcdfg", "OTHER-UID", version) is None
    assert cache.known_claim("demo", "my-pod-gpu-bcdfg", "C1", "") is None
