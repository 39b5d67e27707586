"""The acceptance scenarios of the resourceclaim spec (section 15) as converging steps.

Each function sets a scenario up in one namespace, waits until the cluster reaches the
spec's expected state and asserts it. Nothing here depends on who acts on the claims: the
same steps run against our operator and against the in-tree controller of an upstream-mode
cluster, so the differential test compares the states they leave behind. Checks that only
apply to our operator (Events' source, metrics, field managers, observation windows) stay
in the tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from devcluster.kube import ApiError, Kube, wait_for
from devcluster.nodes import create_fake_node, delete_fake_node
from e2e.resourceclaim.support import (
    DELETE_PROTECTION_FINALIZER,
    DRIVER,
    EXTENDED_CLAIM,
    FAILED_CREATION,
    GENERATED_SUFFIX,
    HOLD_FINALIZER,
    POD_CLAIM_NAME,
    allocate,
    allocation,
    assert_generated_claim,
    assert_unchanged,
    claim_body,
    claim_statuses,
    claims_of_pod,
    claims_path,
    create_claim,
    create_pod,
    create_template,
    delete_pod_now,
    finalizers,
    is_allocated,
    named_entry,
    pod_body,
    pod_consumer,
    pod_events,
    pods_path,
    release_pod,
    reserved_for,
    set_phase,
    template_body,
    template_entry,
    update_claim_status,
    wait_claim,
    wait_generated,
    wait_value,
)
from e2e.support import cleanup_namespace, make_namespace
from operators.core import protowire

TIMEOUT = 30.0
# How long a differential's end state must stay unchanged before it is compared.
SETTLE = 5.0
MISSING_TEMPLATE_MESSAGE = (
    'PodResourceClaim gpu: resource claim template "missing": '
    'resourceclaimtemplate.resource.k8s.io "missing" not found'
)
WIDGET = {"apiGroup": "example.com", "resource": "widgets", "name": "w", "uid": "0000-widget"}
POD_GROUP = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "0000-podgroup"}
GHOST = {"resource": "pods", "name": "ghost", "uid": "0000-ghost"}
# Opaque parameters as clients store them, byte for byte: a Go client's (what the JSON of any
# client becomes once it passed Go's encoder), and forms that Go's encoder would write otherwise
# (Python's default separators, unsorted keys, HTML characters, non-ASCII, a float's own literal).
RAW_PARAMETERS = {
    "go": '{"a":"b"}',
    "spaced": '{"b": 1, "a": "x"}',
    "html": '{"cmd":"a<b && c>d"}',
    "unicode": '{"name":"é"}',
    "float": '{"ratio":1.50,"small":1e-7}',
}


@dataclass
class Ctx:
    api: Kube
    ns: str
    node: str
    """A fake node for pods that bypass the scheduler."""


@contextmanager
def scenario_set(api: Kube, request: pytest.FixtureRequest) -> Iterator[Ctx]:
    """A fresh namespace and fake node for one side of a differential test, removed at the end."""
    ns = make_namespace(api, request)
    node = f"node-{ns}"
    create_fake_node(api, node)
    try:
        yield Ctx(api, ns, node)
    finally:
        cleanup_namespace(api, ns)
        delete_fake_node(api, node)


def common_template(ctx: Ctx, name: str = "gpu-tmpl", **extra_annotations: str) -> dict[str, Any]:
    return create_template(
        ctx.api,
        ctx.ns,
        template_body(name, labels={"app": "demo"}, annotations={"note": "x", **extra_annotations}),
    )


def _claim(ctx: Ctx, name: str) -> dict[str, Any] | None:
    claim: dict[str, Any] | None = ctx.api.get_or_none(claims_path(ctx.ns, name))
    return claim


# -- claims from templates --------------------------------------------------------------------


def s01_create(ctx: Ctx) -> tuple[dict[str, Any], dict[str, Any]]:
    """Scenario 1: one claim from the template, named, owned and annotated as the spec says."""
    common_template(ctx)
    pod = create_pod(ctx.api, ctx.ns, pod_body("my-pod", [template_entry("gpu", "gpu-tmpl")]))
    claim = wait_generated(ctx.api, ctx.ns, pod, "gpu")
    assert_generated_claim(ctx.api, ctx.ns, claim, pod, "my-pod-gpu-")
    meta = claim["metadata"]
    assert claim_statuses(ctx.api, ctx.ns, "my-pod") == [{"name": "gpu", "resourceClaimName": meta["name"]}]
    assert len(claims_of_pod(ctx.api, ctx.ns, pod)) == 1
    return pod, claim


def s02_annotation_override(ctx: Ctx) -> None:
    """Scenario 2: our pod-claim-name annotation wins over the template's."""
    common_template(ctx, "override-tmpl", **{POD_CLAIM_NAME: "other"})
    pod = create_pod(ctx.api, ctx.ns, pod_body("override", [template_entry("gpu", "override-tmpl")]))
    claim = wait_generated(ctx.api, ctx.ns, pod, "gpu")
    assert claim["metadata"]["annotations"] == {"note": "x", POD_CLAIM_NAME: "gpu"}


TRUNCATIONS = [
    ("a" * 60, "gpu", "a" * 52 + "-gp"),
    ("p" * 30, "c" * 30, "p" * 27 + "-" + "c" * 27),
    ("x" * 50, "y" * 5, "x" * 50 + "-" + "y" * 5 + "-"),
    ("x" * 50, "y" * 6, "x" * 49 + "-" + "y" * 5),
]


def s03_truncation(ctx: Ctx) -> None:
    """Scenario 3: proportional truncation of long generateName bases. The two ``x`` rows
    are two entries of one pod, since a namespace holds one pod of a name."""
    pods: dict[str, list[str]] = {}
    for pod_name, entry, _ in TRUNCATIONS:
        pods.setdefault(pod_name, []).append(entry)
    created = {
        name: create_pod(ctx.api, ctx.ns, pod_body(name, [template_entry(e, "gpu-tmpl") for e in entries]))
        for name, entries in pods.items()
    }
    for pod_name, entry, generate_name in TRUNCATIONS:
        claim = wait_generated(ctx.api, ctx.ns, created[pod_name], entry)
        assert claim["metadata"]["generateName"] == generate_name
        assert re.fullmatch(re.escape(generate_name) + GENERATED_SUFFIX, claim["metadata"]["name"])


def s04_two_claims(ctx: Ctx) -> dict[str, Any]:
    """Scenario 4, first part: two template entries, one sorted status list."""
    pod = create_pod(
        ctx.api,
        ctx.ns,
        pod_body("two", [template_entry("nic", "gpu-tmpl"), template_entry("gpu", "gpu-tmpl")]),
    )
    gpu = wait_generated(ctx.api, ctx.ns, pod, "gpu")
    nic = wait_generated(ctx.api, ctx.ns, pod, "nic")
    assert claim_statuses(ctx.api, ctx.ns, "two") == [
        {"name": "gpu", "resourceClaimName": gpu["metadata"]["name"]},
        {"name": "nic", "resourceClaimName": nic["metadata"]["name"]},
    ]
    return pod


def s04_replace_deleted_claim(ctx: Ctx, pod: dict[str, Any]) -> None:
    """Scenario 4, second part: a claim deleted by hand is re-created; the other entry stays."""
    before = {s["name"]: s["resourceClaimName"] for s in claim_statuses(ctx.api, ctx.ns, "two")}
    ctx.api.delete(claims_path(ctx.ns, before["nic"]))

    def replaced() -> list[dict[str, Any]] | None:
        statuses = claim_statuses(ctx.api, ctx.ns, "two")
        names = {s["name"]: s.get("resourceClaimName") for s in statuses}
        return statuses if names.get("nic") not in (None, before["nic"]) else None

    statuses = wait_for(replaced, TIMEOUT, "the nic claim to be re-created")
    new_nic = wait_generated(ctx.api, ctx.ns, pod, "nic")
    assert statuses == [
        {"name": "gpu", "resourceClaimName": before["gpu"]},
        {"name": "nic", "resourceClaimName": new_nic["metadata"]["name"]},
    ]
    assert len(claims_of_pod(ctx.api, ctx.ns, pod)) == 2


def s05_missing_template_pod(ctx: Ctx) -> dict[str, Any]:
    """Scenario 5, first part: the pod waits; the Warning names the missing template."""
    pod = create_pod(ctx.api, ctx.ns, pod_body("waiting", [template_entry("gpu", "missing")]))
    wait_for(
        lambda: [
            e
            for e in pod_events(ctx.api, ctx.ns, "waiting")
            if e["reason"] == FAILED_CREATION and e["message"] == MISSING_TEMPLATE_MESSAGE
        ],
        TIMEOUT,
        "the missing-template Event",
    )
    assert not claims_of_pod(ctx.api, ctx.ns, pod)
    return pod


def s05_create_template(ctx: Ctx, pod: dict[str, Any], within: float = 5.0) -> dict[str, Any]:
    """Scenario 5, second part: the template's creation completes the pod at once."""
    common_template(ctx, "missing")
    return wait_generated(ctx.api, ctx.ns, pod, "gpu", timeout=within)


def s08_user_claim_pod(ctx: Ctx) -> dict[str, Any]:
    """Scenario 8 setup: a pod naming a user claim that does not exist."""
    return create_pod(ctx.api, ctx.ns, pod_body("user", [named_entry("gpu", "shared")]))


def s08_user_creates_claim(ctx: Ctx) -> None:
    create_claim(ctx.api, ctx.ns, claim_body("shared"))


# -- pods that bypass the scheduler ------------------------------------------------------------


def allocated_user_claim(ctx: Ctx, name: str, consumers: list[dict[str, str]] | None = None) -> None:
    create_claim(ctx.api, ctx.ns, claim_body(name))
    allocate(ctx.api, ctx.ns, name, consumers or ())


def s13_reserve_prescheduled(ctx: Ctx) -> dict[str, Any]:
    """Scenario 13: an allocated user claim gets reserved for a pod with spec.nodeName."""
    allocated_user_claim(ctx, "shared13")
    pod = create_pod(ctx.api, ctx.ns, pod_body("p13", [named_entry("gpu", "shared13")], node_name=ctx.node))
    claim = wait_claim(
        ctx.api, ctx.ns, "shared13", lambda c: bool(reserved_for(c)), "shared13 to be reserved"
    )
    assert reserved_for(claim) == [pod_consumer(pod)]
    return pod


def s17_18_shared_claim(ctx: Ctx) -> None:
    """Scenarios 17 and 18: consumers go one by one; the last one's exit deallocates."""
    allocated_user_claim(ctx, "shared17")
    p1 = create_pod(ctx.api, ctx.ns, pod_body("p17-1", [named_entry("gpu", "shared17")], node_name=ctx.node))
    wait_claim(ctx.api, ctx.ns, "shared17", lambda c: reserved_for(c) == [pod_consumer(p1)], "P1's entry")
    p2 = create_pod(ctx.api, ctx.ns, pod_body("p17-2", [named_entry("gpu", "shared17")], node_name=ctx.node))
    both = [pod_consumer(p1), pod_consumer(p2)]
    wait_claim(ctx.api, ctx.ns, "shared17", lambda c: reserved_for(c) == both, "P1's and P2's entries")

    delete_pod_now(ctx.api, ctx.ns, "p17-2")
    claim = wait_claim(
        ctx.api, ctx.ns, "shared17", lambda c: reserved_for(c) == [pod_consumer(p1)], "P2's entry to go"
    )
    assert is_allocated(claim), "the allocation must stay while P1 uses the claim"
    assert DELETE_PROTECTION_FINALIZER in finalizers(claim)

    delete_pod_now(ctx.api, ctx.ns, "p17-1")
    claim = wait_claim(
        ctx.api,
        ctx.ns,
        "shared17",
        lambda c: not finalizers(c),
        "the last consumer's exit to release shared17",
    )
    assert reserved_for(claim) == []
    assert not is_allocated(claim)


def _with_raw_parameters(body: dict[str, Any], parameters: str) -> str:
    """``body`` as JSON text with ``parameters`` as the one opaque configuration, as written."""
    return json.dumps(body, separators=(",", ":")).replace('"@parameters@"', parameters)


def _opaque(where: dict[str, Any], **extra: Any) -> None:
    where["config"] = [{"opaque": {"driver": DRIVER, "parameters": "@parameters@"}, **extra}]


def s29_raw_parameters(ctx: Ctx, form: str) -> None:
    """A user's claim with opaque parameters stored in ``form`` (RAW_PARAMETERS): reserved for
    two pods, released by one, deleted while the other still uses it, and released, deallocated
    and gone when that one goes. kube-apiserver compares the stored parameters byte for byte."""
    name = f"raw-{form}"
    parameters = RAW_PARAMETERS[form]
    claim = claim_body(name, finalizer=True)
    _opaque(claim["spec"]["devices"])
    ctx.api.request("POST", claims_path(ctx.ns), body=_with_raw_parameters(claim, parameters))
    stored = ctx.api.get(claims_path(ctx.ns, name))
    status = {"allocation": allocation()}
    _opaque(status["allocation"]["devices"], source="FromClaim", requests=["req-0"])
    ctx.api.request(
        "PUT",
        claims_path(ctx.ns, name, "status"),
        body=_with_raw_parameters({**stored, "status": status}, parameters),
    )
    first = create_pod(ctx.api, ctx.ns, pod_body(f"{name}-1", [named_entry("gpu", name)], node_name=ctx.node))
    second = create_pod(
        ctx.api, ctx.ns, pod_body(f"{name}-2", [named_entry("gpu", name)], node_name=ctx.node)
    )
    both = sorted([pod_consumer(first), pod_consumer(second)], key=str)
    wait_claim(
        ctx.api, ctx.ns, name, lambda c: sorted(reserved_for(c), key=str) == both, f"{name} reserved twice"
    )

    delete_pod_now(ctx.api, ctx.ns, f"{name}-2")
    claim = wait_claim(ctx.api, ctx.ns, name, lambda c: reserved_for(c) == [pod_consumer(first)], "one left")
    assert is_allocated(claim), f"{name} must stay allocated while its first pod uses it"

    ctx.api.delete(claims_path(ctx.ns, name))
    claim = wait_claim(
        ctx.api, ctx.ns, name, lambda c: bool(c["metadata"].get("deletionTimestamp")), "deleting"
    )
    assert reserved_for(claim) == [pod_consumer(first)], "a claim in use is not released by its deletion"
    assert raw_parameters(ctx.api, ctx.ns, name) == parameters.encode()

    delete_pod_now(ctx.api, ctx.ns, f"{name}-1")
    wait_for(lambda: ctx.api.get_or_none(claims_path(ctx.ns, name)) is None, TIMEOUT, f"{name} to be gone")


def raw_parameters(api: Kube, ns: str, name: str) -> bytes:
    """The claim's stored parameters, as protobuf carries them (JSON would show them compacted)."""
    try:
        envelope = api.request("GET", claims_path(ns, name), accept=protowire.CONTENT_TYPE)
    except ApiError as err:
        raise AssertionError(f"read claim {ns}/{name} as protobuf: {err}") from err
    spec = protowire.values(protowire.unwrap(envelope)[2], 2)[0]
    devices = protowire.values(spec, 1)[0]
    config = protowire.values(devices, 3)[0]
    opaque = protowire.values(protowire.values(config, 2)[0], 1)[0]
    return protowire.values(protowire.values(opaque, 2)[0], 1)[0]


def s19_20_23_foreign_entries(ctx: Ctx) -> None:
    """Scenarios 19, 20 and 23: other kinds' entries stay; a pod nobody knows goes."""
    allocated_user_claim(ctx, "shared19", [WIDGET, POD_GROUP, GHOST])
    claim = wait_claim(
        ctx.api,
        ctx.ns,
        "shared19",
        lambda c: reserved_for(c) == [WIDGET, POD_GROUP],
        "the ghost pod's entry to go",
    )
    assert is_allocated(claim)
    assert DELETE_PROTECTION_FINALIZER in finalizers(claim)


def s25_extended_resource_claim(ctx: Ctx) -> None:
    """Scenario 25: kube-scheduler's extended-resource claim is released and deleted when
    its pod fails. The test plays kube-scheduler's part."""
    pod = create_pod(ctx.api, ctx.ns, pod_body("ext", [], extended_resource="example.com/gpu"))
    name = "ext-extended-resources-abcde"
    body = claim_body(name, owner=pod, annotations={EXTENDED_CLAIM: "true"}, request="container-0-request-0")
    create_claim(ctx.api, ctx.ns, body)
    ctx.api.patch(
        pods_path(ctx.ns, "ext", "status"),
        {
            "status": {
                "extendedResourceClaimStatus": {
                    "resourceClaimName": name,
                    "requestMappings": [
                        {
                            "containerName": "main",
                            "resourceName": "example.com/gpu",
                            "requestName": "container-0-request-0",
                        }
                    ],
                }
            }
        },
    )
    claim = ctx.api.get(claims_path(ctx.ns, name))
    claim["metadata"]["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    ctx.api.replace(claims_path(ctx.ns, name), claim)

    def change(status: dict[str, Any]) -> None:
        status["allocation"] = {
            "devices": {
                "results": [
                    {
                        "request": "container-0-request-0",
                        "driver": "gpu.example.com",
                        "pool": "p",
                        "device": "d",
                    }
                ]
            }
        }
        status["reservedFor"] = [pod_consumer(pod)]

    update_claim_status(ctx.api, ctx.ns, name, change)
    set_phase(ctx.api, ctx.ns, "ext", "Failed")
    wait_for(lambda: _claim(ctx, name) is None, TIMEOUT, "the extended-resource claim to be deleted")


def s26_claim_being_deleted(ctx: Ctx) -> None:
    """Scenario 26: a deleted, allocated, unused claim is deallocated and let go."""
    allocated_user_claim(ctx, "deleting")
    ctx.api.delete(claims_path(ctx.ns, "deleting"))
    wait_for(lambda: _claim(ctx, "deleting") is None, TIMEOUT, "the deleted claim to disappear")


def s27_allocated_unused(ctx: Ctx) -> None:
    """Scenario 27 setup: an allocated claim that never had a consumer (checked later)."""
    allocated_user_claim(ctx, "unused")


def s27_check(ctx: Ctx) -> None:
    claim = _claim(ctx, "unused")
    assert claim is not None
    assert is_allocated(claim), "an allocated claim that was never used stays allocated"
    assert DELETE_PROTECTION_FINALIZER in finalizers(claim)


# -- scenarios only our operator is tested on --------------------------------------------------


def s12_claim_no_longer_owned(ctx: Ctx) -> None:
    """Scenario 12. A pod is synced again only when some entry needs work (spec section 5
    skips an entry whose claim lost its owner), so the pod bypasses the scheduler and also
    names a user claim; allocating that claim is what brings the pod back to the queue."""
    create_claim(ctx.api, ctx.ns, claim_body("shared12"))
    pod = create_pod(
        ctx.api,
        ctx.ns,
        pod_body(
            "p12", [template_entry("gpu", "gpu-tmpl"), named_entry("dev", "shared12")], node_name=ctx.node
        ),
    )
    old = wait_generated(ctx.api, ctx.ns, pod, "gpu")
    old_name = old["metadata"]["name"]
    orphaned = ctx.api.patch(claims_path(ctx.ns, old_name), {"metadata": {"ownerReferences": None}})
    allocate(ctx.api, ctx.ns, "shared12")

    def repointed() -> str | None:
        names = {s["name"]: s.get("resourceClaimName") for s in claim_statuses(ctx.api, ctx.ns, "p12")}
        return names["gpu"] if names.get("gpu") not in (None, old_name) else None

    new_name = wait_value(repointed, TIMEOUT, "the status to name a new gpu claim")
    new = wait_generated(ctx.api, ctx.ns, pod, "gpu")
    assert new["metadata"]["name"] == new_name
    untouched = ctx.api.get(claims_path(ctx.ns, old_name))
    assert untouched["metadata"]["resourceVersion"] == orphaned["metadata"]["resourceVersion"]
    wait_claim(
        ctx.api, ctx.ns, "shared12", lambda c: reserved_for(c) == [pod_consumer(pod)], "shared12's entry"
    )


def s21_deleted_before_scheduling(ctx: Ctx) -> None:
    """Scenario 21: a pod deleted before it was scheduled loses its reservation and claim."""
    pod = create_pod(
        ctx.api, ctx.ns, pod_body("p21", [template_entry("gpu", "gpu-tmpl")], finalizers=[HOLD_FINALIZER])
    )
    claim = wait_generated(ctx.api, ctx.ns, pod, "gpu")
    name = claim["metadata"]["name"]
    allocate(ctx.api, ctx.ns, name, [pod_consumer(pod)])
    ctx.api.delete(pods_path(ctx.ns, "p21"))
    try:
        wait_for(lambda: _claim(ctx, name) is None, TIMEOUT, "the claim of the deleted pod to go")
    finally:
        release_pod(ctx.api, ctx.ns, "p21")


def s22_deleted_while_scheduled(ctx: Ctx) -> None:
    """Scenario 22: a running pod keeps its reservation until it is terminal."""
    allocated_user_claim(ctx, "shared22")
    pod = create_pod(
        ctx.api,
        ctx.ns,
        pod_body("p22", [named_entry("gpu", "shared22")], node_name=ctx.node, finalizers=[HOLD_FINALIZER]),
    )
    try:
        wait_claim(
            ctx.api, ctx.ns, "shared22", lambda c: reserved_for(c) == [pod_consumer(pod)], "p22's entry"
        )
        set_phase(ctx.api, ctx.ns, "p22", "Running")
        ctx.api.delete(pods_path(ctx.ns, "p22"))
        assert ctx.api.get(pods_path(ctx.ns, "p22"))["metadata"].get("deletionTimestamp")
        assert_unchanged(
            lambda: reserved_for(ctx.api.get(claims_path(ctx.ns, "shared22"))), 5, "the running pod's entry"
        )
        set_phase(ctx.api, ctx.ns, "p22", "Succeeded")
        wait_claim(
            ctx.api,
            ctx.ns,
            "shared22",
            lambda c: not reserved_for(c) and not is_allocated(c),
            "the terminal pod's entry to go",
        )
    finally:
        release_pod(ctx.api, ctx.ns, "p22")


def s24_replaced_pod(ctx: Ctx) -> None:
    """Scenario 24: a pod re-created under its name gets a new claim; the old one goes."""
    first = create_pod(
        ctx.api, ctx.ns, pod_body("web-0", [template_entry("gpu", "gpu-tmpl")], node_name=ctx.node)
    )
    old = wait_generated(ctx.api, ctx.ns, first, "gpu")
    old_name = old["metadata"]["name"]
    allocate(ctx.api, ctx.ns, old_name)
    wait_claim(ctx.api, ctx.ns, old_name, lambda c: reserved_for(c) == [pod_consumer(first)], "U1's entry")
    delete_pod_now(ctx.api, ctx.ns, "web-0")
    second = create_pod(
        ctx.api, ctx.ns, pod_body("web-0", [template_entry("gpu", "gpu-tmpl")], node_name=ctx.node)
    )
    new = wait_generated(ctx.api, ctx.ns, second, "gpu")
    assert new["metadata"]["name"] != old_name
    wait_for(lambda: _claim(ctx, old_name) is None, TIMEOUT, "U1's claim to be deleted")
