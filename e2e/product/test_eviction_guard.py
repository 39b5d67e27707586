"""The eviction guard (``manifests/components/eviction-guard``) on a real 1.37 apiserver: a NoExecute
taint on every device of the cluster is refused, with the message docs/operate.md quotes, unless the
object carries the annotation; everything narrower, and every other effect, is let through.

The session installs the guard from the component, as docs/operate.md says, before the first test
(``harness.eviction_guard``, from the ``cluster`` fixture): every DeviceTaintRule and
DeviceTaintSelector of the whole e2e run passes through it, so the run as a whole shows that an
ordinary rule is never affected. Only the tests that evict cluster-wide on purpose carry the
annotation (``cluster_wide=True`` of ``e2e.devicetaint.world.World.rule``).

Nothing is stored that would keep pods off, or evict them from, every device (NoSchedule,
NoExecute): the guard's acceptance of those is a server-side dry run, which passes through
admission all the same. Effect None is stored for real: it only reports.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.constants import REPO_ROOT
from devcluster.kube import ApiError, Kube, wait_for
from e2e import harness
from e2e.support import ALLOW_CLUSTER_WIDE_EVICTION, EVICTION_GUARD, Tracker, guard_refusal
from e2e.taintselector import support as ts

RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
ALLOWED = {ALLOW_CLUSTER_WIDE_EVICTION: "true"}


def _refusal_of(kind_file: str, resource: str) -> Callable[[dict[str, Any]], str]:
    """What kube-apiserver answers when the policy of ``kind_file`` refuses an object: the
    policy's message, after the object and the policy and binding that refused it."""
    policy, binding = (d for d in yaml.safe_load_all((EVICTION_GUARD / kind_file).read_text()) if d)
    (validation,) = policy["spec"]["validations"]
    return lambda body: (
        f'{resource} "{body["metadata"]["name"]}" is forbidden: '
        f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding "
        f"'{binding['metadata']['name']}' denied request: {validation['message']}"
    )


RULE_REFUSAL = _refusal_of("devicetaintrules.yaml", "devicetaintrules.resource.k8s.io")
SELECTOR_REFUSAL = _refusal_of("devicetaintselectors.yaml", "devicetaintselectors.dra-operators.io")
HEALTH_POLICY_REFUSAL = _refusal_of("devicehealthpolicies.yaml", "devicehealthpolicies.dra-operators.io")
HEALTH_CRD = "devicehealthpolicies.dra-operators.io"
HEALTH_POLICIES = "/apis/dra-operators.io/v1alpha1/devicehealthpolicies"


def _rule(
    name: str,
    selector: dict[str, str] | None,
    effect: str = "NoExecute",
    annotations: dict[str, str] | None = None,
    api_version: str = "resource.k8s.io/v1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "dra-operators.test/maintenance", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {
        "apiVersion": api_version,
        "kind": "DeviceTaintRule",
        "metadata": {"name": name, **({"annotations": annotations} if annotations else {})},
        "spec": spec,
    }


def _selector(
    name: str, chosen: dict[str, Any], effect: str = "NoExecute", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceTaintSelector",
        "metadata": {"name": name, **({"annotations": annotations} if annotations else {})},
        "spec": {"taint": {"key": ts.KEY, "effect": effect}, "deviceSelector": chosen},
    }


def _refused_update(api: Kube, path: str, body: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as caught:
        api.replace(path, body)
    assert caught.value.status == 403, caught.value
    return caught.value.message


def _evict_after_dry_run(
    api: Kube, collection: str, dry_run: dict[str, Any], refusal: Callable[[dict[str, Any]], str]
) -> None:
    """Turning a stored dry run (effect None) into NoExecute is refused with ``refusal``; then the
    two steps of docs/operate.md: the annotation (a metadata-only update, which the guard lets through),
    then the effect NoExecute (a server-side dry run, so it taints nothing)."""
    path = f"{collection}/{dry_run['metadata']['name']}"
    evicting = copy.deepcopy(dry_run)
    evicting["spec"]["taint"]["effect"] = "NoExecute"
    assert _refused_update(api, path, evicting) == refusal(evicting)
    annotated = api.patch(path, {"metadata": {"annotations": ALLOWED}})
    assert annotated["spec"]["taint"]["effect"] == "None"
    evicting = api.request(
        "PATCH",
        path,
        params={"dryRun": "All"},
        body={"spec": {"taint": {"effect": "NoExecute"}}},
        content_type="application/merge-patch+json",
    )
    assert evicting["spec"]["taint"]["effect"] == "NoExecute"


def test_the_session_installed_the_component_and_its_cel_type_checks(
    cluster: harness.Cluster, api: Kube
) -> None:
    """Both policies and bindings of the component are in the cluster, and the API server's type
    check of the DeviceTaintRule policy against the built-in schema found nothing to warn about."""
    rendered = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(EVICTION_GUARD)).stdout) if d]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in rendered) == [
        ("ValidatingAdmissionPolicy", "dra-operators-eviction-guard-devicehealthpolicies"),
        ("ValidatingAdmissionPolicy", "dra-operators-eviction-guard-devicetaintrules"),
        ("ValidatingAdmissionPolicy", "dra-operators-eviction-guard-devicetaintselectors"),
        ("ValidatingAdmissionPolicyBinding", "dra-operators-eviction-guard-devicehealthpolicies"),
        ("ValidatingAdmissionPolicyBinding", "dra-operators-eviction-guard-devicetaintrules"),
        ("ValidatingAdmissionPolicyBinding", "dra-operators-eviction-guard-devicetaintselectors"),
    ]
    plurals = {
        "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
        "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
    }
    for wanted in rendered:
        plural = plurals[wanted["kind"]]
        installed = api.get(f"/apis/admissionregistration.k8s.io/v1/{plural}/{wanted['metadata']['name']}")
        for field in ("validations", "variables", "policyName", "validationActions"):
            if field in wanted["spec"]:
                assert installed["spec"][field] == wanted["spec"][field], field

    def checked() -> dict[str, Any] | None:
        policy = api.get(f"{POLICIES}/dra-operators-eviction-guard-devicetaintrules")
        status = policy.get("status") or {}
        if status.get("observedGeneration") != policy["metadata"]["generation"]:
            return None
        return status

    status = wait_for(checked, 60, "the API server to type-check the DeviceTaintRule policy")
    assert status is not None
    assert not (status.get("typeChecking") or {}).get("expressionWarnings"), status


def test_device_taint_rules(api: Kube, objects: Tracker, unique_name: Callable[[str], str]) -> None:
    """Refused: NoExecute with an empty selector, whichever API version the request uses,
    and an update that turns a dry run (effect None) into NoExecute. Accepted: the same with the
    annotation, a selector that names a driver, a pool or a device, effects None and NoSchedule,
    and updates that leave the spec alone."""
    beta = _rule(unique_name("beta"), {}, api_version="resource.k8s.io/v1beta2")
    assert guard_refusal(api, "/apis/resource.k8s.io/v1beta2/devicetaintrules", beta) == RULE_REFUSAL(beta)
    for refused in (
        _rule(unique_name("everything"), {}),
        _rule(unique_name("not-true"), {}, annotations={ALLOW_CLUSTER_WIDE_EVICTION: "yes"}),
    ):
        assert guard_refusal(api, RULES, refused) == RULE_REFUSAL(refused)
    for allowed in (
        _rule(unique_name("everything"), {}, annotations=ALLOWED),
        # No selector selects no device (upstream's conformance CRUD spec writes this rule).
        _rule(unique_name("missing"), None),
        _rule(unique_name("no-schedule"), {}, "NoSchedule"),
    ):
        assert guard_refusal(api, RULES, allowed) is None, allowed["metadata"]

    # Stored for real: they taint no device, or only a driver's that publishes none.
    for narrow in (
        {"driver": "nothing.e2e.dra-operators.test"},
        {"pool": "no-such-pool"},
        {"device": "no-such-device"},
    ):
        objects.create(RULES, _rule(unique_name("narrow"), narrow))
    dry_run = objects.create(RULES, _rule(unique_name("dry-run"), {}, "None"))
    _evict_after_dry_run(api, RULES, dry_run, RULE_REFUSAL)


def test_device_taint_selectors(
    cluster: harness.Cluster, api: Kube, objects: Tracker, unique_name: Callable[[str], str]
) -> None:
    """Refused: NoExecute with allDevices, and an update that turns such a dry run into NoExecute.
    Accepted: the same with the annotation, effects None and NoSchedule, and a selector with a
    driver. The CRD may be installed only now: the guard matches it by name once it is served."""
    ts.install_crd(cluster)
    every = _selector(unique_name("every"), {"allDevices": True})
    refusal = wait_for(
        lambda: guard_refusal(api, ts.SELECTORS, every),
        60,
        "the eviction guard to refuse a NoExecute DeviceTaintSelector with allDevices",
    )
    assert refusal == SELECTOR_REFUSAL(every)
    for allowed in (
        _selector(unique_name("every"), {"allDevices": True}, annotations=ALLOWED),
        _selector(unique_name("no-schedule"), {"allDevices": True}, "NoSchedule"),
        _selector(unique_name("driver"), {"driver": "gpu.e2e.dra-operators.test"}),
    ):
        assert guard_refusal(api, ts.SELECTORS, allowed) is None, allowed["metadata"]

    # No taintselector operator runs here, so a stored selector makes no DeviceTaintRule.
    dry_run = objects.create(ts.SELECTORS, _selector(unique_name("dry-run"), {"allDevices": True}, "None"))
    _evict_after_dry_run(api, ts.SELECTORS, dry_run, SELECTOR_REFUSAL)


def _health_policy(
    name: str,
    effect: str = "NoExecute",
    max_unavailable: int | str = "100%",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceHealthPolicy",
        "metadata": {"name": name, **({"annotations": annotations} if annotations else {})},
        "spec": {
            "scope": {"allDevices": True},
            "signals": {"sliceTaint": {"key": "dra-operators.test/unhealthy"}},
            "action": {"effect": effect},
            "maxUnavailable": max_unavailable,
        },
    }


def test_device_health_policies(
    cluster: harness.Cluster, api: Kube, objects: Tracker, unique_name: Callable[[str], str]
) -> None:
    """Refused: NoExecute over allDevices with maxUnavailable 100%, also when the effect comes from
    the CRD's default, and an update that turns such a dry run into NoExecute. Accepted: the same
    with the annotation, with a lower maxUnavailable (a number or a percentage), and effects None
    and NoSchedule. No devicehealth operator runs here, so a stored policy taints nothing."""
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=e2e-eviction-guard",
        "-f",
        str(REPO_ROOT / "crds" / f"{HEALTH_CRD}.yaml"),
    )
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{HEALTH_CRD}", "--timeout=30s")
    unguarded = _health_policy(unique_name("unguarded"))
    refusal = wait_for(
        lambda: guard_refusal(api, HEALTH_POLICIES, unguarded),
        60,
        "the eviction guard to refuse a NoExecute DeviceHealthPolicy over allDevices at 100%",
    )
    assert refusal == HEALTH_POLICY_REFUSAL(unguarded)
    defaulted = _health_policy(unique_name("defaulted"))
    del defaulted["spec"]["action"]
    assert guard_refusal(api, HEALTH_POLICIES, defaulted) == HEALTH_POLICY_REFUSAL(defaulted)
    for allowed in (
        _health_policy(unique_name("allowed"), annotations=ALLOWED),
        _health_policy(unique_name("fifty"), max_unavailable="50%"),
        _health_policy(unique_name("two"), max_unavailable=2),
        _health_policy(unique_name("no-schedule"), "NoSchedule"),
    ):
        assert guard_refusal(api, HEALTH_POLICIES, allowed) is None, allowed["metadata"]

    dry_run = objects.create(HEALTH_POLICIES, _health_policy(unique_name("dry-run"), "None"))
    path = f"{HEALTH_POLICIES}/{dry_run['metadata']['name']}"
    evicting = copy.deepcopy(dry_run)
    evicting["spec"]["action"]["effect"] = "NoExecute"
    assert _refused_update(api, path, evicting) == HEALTH_POLICY_REFUSAL(evicting)


def test_a_kustomization_with_a_namespace_installs_the_guard_cluster_wide(
    cluster: harness.Cluster, tmp_path: Path
) -> None:
    """The form of docs/operate.md: the component beside manifests/ in a kustomization that sets a
    namespace. kustomize does not know the policies are cluster-scoped and gives them the
    namespace; the API server accepts them and drops it (a server-side dry run)."""
    cluster.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "manifests/namespace/namespace.yaml"))
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namespace": "dra-operators",
                # kustomize refuses absolute paths.
                "resources": [os.path.relpath(REPO_ROOT / "manifests", tmp_path)],
                "components": [os.path.relpath(EVICTION_GUARD, tmp_path)],
            }
        )
    )
    done = cluster.kubectl("apply", "--dry-run=server", "-k", str(tmp_path), "-o", "yaml", timeout=120)
    items = yaml.safe_load(done.stdout)["items"]
    guard = [i for i in items if i["kind"].startswith("ValidatingAdmissionPolicy")]
    assert len(guard) == 6, [i["kind"] for i in items]
    assert all("namespace" not in i["metadata"] for i in guard), [i["metadata"] for i in guard]
