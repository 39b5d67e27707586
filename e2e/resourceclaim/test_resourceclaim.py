"""The resourceclaim operator against a real control plane (spec section 15).

One operator process runs for the whole module, as a subprocess under the ServiceAccount
and RBAC of ``manifests/``, with the in-tree resourceclaim controller off and the real
kube-scheduler on. Scenarios that share setup or an observation window share a test; the
pod that waits 60 s for its template is created when the module starts and completed by
the last test, so that minute overlaps with the other scenarios.

Scenarios 9 and 28 (injected API failures) are covered at unit level; scenario 32 (leader
election) belongs to another issue.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster.kube import ApiError, Kube, wait_for
from e2e import harness
from e2e.harness import metric
from e2e.resourceclaim.scenarios import (
    MISSING_TEMPLATE_MESSAGE,
    RAW_PARAMETERS,
    TIMEOUT,
    Ctx,
    common_template,
    s01_create,
    s02_annotation_override,
    s03_truncation,
    s04_replace_deleted_claim,
    s04_two_claims,
    s05_create_template,
    s05_missing_template_pod,
    s08_user_claim_pod,
    s08_user_creates_claim,
    s12_claim_no_longer_owned,
    s13_reserve_prescheduled,
    s17_18_shared_claim,
    s19_20_23_foreign_entries,
    s21_deleted_before_scheduling,
    s22_deleted_while_scheduled,
    s24_replaced_pod,
    s25_extended_resource_claim,
    s26_claim_being_deleted,
    s27_allocated_unused,
    s27_check,
    s29_raw_parameters,
)
from e2e.resourceclaim.support import (
    CREATES,
    DELETE_PROTECTION_FINALIZER,
    FAILED_CREATION,
    GENERATED_SUFFIX,
    OUR_MANAGER,
    POD_CLAIM_NAME,
    POD_OWNER,
    ObjectHistory,
    allocate,
    assert_no_foreign_state,
    assert_unchanged,
    claim_body,
    claim_statuses,
    claims,
    claims_of_pod,
    claims_path,
    create_claim,
    create_pod,
    create_template,
    finalizers,
    named_entry,
    pod_body,
    pod_consumer,
    pod_events,
    pods_path,
    reserved_for,
    set_phase,
    status_managers,
    template_body,
    template_entry,
    wait_claim,
    wait_generated,
    wait_value,
)
from e2e.support import Tracker, cleanup_namespace, make_namespace

LATE_TEMPLATE_AFTER = 60.0
QUIET_PERIOD = 30.0
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_MESSAGE = (
    "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label "
    "on the containing namespace"
)
REJECT_LABEL = "e2e.dra-operators.test/reject"


@pytest.fixture(scope="module")
def rc(
    cluster: harness.Cluster, operator_identity: Callable[[str], str]
) -> Iterator[harness.RunningOperator]:
    kubeconfig = operator_identity("resourceclaim")
    with harness.operator_running("resourceclaim", kubeconfig, cluster.workdir, "subprocess") as op:
        yield op


@pytest.fixture(scope="module", autouse=True)
def waiting_pod(
    api: Kube, request: pytest.FixtureRequest, rc: harness.RunningOperator
) -> Iterator[tuple[Ctx, dict[str, Any], float]]:
    """Scenarios 5 and 29, first part: a pod whose template does not exist yet."""
    ctx = Ctx(api, make_namespace(api, request), node="")
    pod = s05_missing_template_pod(ctx)
    yield ctx, pod, time.monotonic()
    cleanup_namespace(api, ctx.ns)


def creates(op: harness.RunningOperator, status: str, admin_access: str) -> float:
    """Creates of claims for pods: the owner labels are upstream's since 1.37."""
    labels = {"status": status, "admin_access": admin_access, **POD_OWNER}
    return metric(op.metrics(), CREATES, **labels) or 0.0


def test_claims_from_templates(api: Kube, namespace: str, rc: harness.RunningOperator) -> None:
    """Scenarios 1, 2 and 3."""
    ctx = Ctx(api, namespace, node="")
    before = creates(rc, "success", "false")
    s01_create(ctx)
    assert creates(rc, "success", "false") == before + 1
    assert not pod_events(api, namespace, "my-pod")
    current = api.get(pods_path(namespace, "my-pod"))
    assert (OUR_MANAGER, "Apply", "status") in status_managers(current)

    s02_annotation_override(ctx)
    s03_truncation(ctx)
    assert len(claims(api, namespace)) == 1 + 1 + 4
    assert_no_foreign_state(api, [namespace])


def test_scheduling_and_quiet_periods(
    cluster: harness.Cluster,
    api: Kube,
    namespace: str,
    rc: harness.RunningOperator,
    objects: Tracker,
    unique_name: Callable[[str], str],
    driver_name: str,
) -> None:
    """The template pod bound by kube-scheduler through our claim, then scenario 16;
    scenarios 4, 8, 13, 14 and 15, with one 30 s observation window for all of them."""
    node, device_class = unique_name("node"), unique_name("class")
    objects.fake_pool(node, device_class, driver_name, 2)
    ctx = Ctx(api, namespace, node)
    common_template(ctx)
    create_template(api, namespace, template_body("real-tmpl", device_class=device_class))
    bound = create_pod(
        api, namespace, pod_body("bound", [template_entry("gpu", "real-tmpl")], scheduled=True)
    )

    # Scenario 15's pod is terminal long before its claim gets allocated.
    create_claim(api, namespace, claim_body("shared15"))
    q = create_pod(api, namespace, pod_body("q15", [named_entry("gpu", "shared15")], node_name=node))
    create_pod(api, namespace, pod_body("p15", [named_entry("gpu", "shared15")], node_name=node))
    set_phase(api, namespace, "p15", "Succeeded")

    two = s04_two_claims(ctx)
    s08_user_claim_pod(ctx)
    s13_reserve_prescheduled(ctx)
    # Written by a PUT of the status subresource, attributed to us.
    assert (OUR_MANAGER, "Update", "status") in status_managers(api.get(claims_path(namespace, "shared13")))
    create_claim(api, namespace, claim_body("shared14"))
    create_pod(api, namespace, pod_body("p14", [named_entry("gpu", "shared14")], node_name=node))
    allocate(api, namespace, "shared15", [pod_consumer(q)])

    # The real scheduler allocates our claim and binds the pod to the fake node.
    claim = wait_generated(api, namespace, bound, "gpu")
    name = claim["metadata"]["name"]
    wait_value(
        lambda: (p := api.get(pods_path(namespace, "bound")))["spec"].get("nodeName") == node and p,
        TIMEOUT,
        "kube-scheduler to bind the template pod",
    )
    claim = wait_claim(
        api,
        namespace,
        name,
        lambda c: reserved_for(c) == [pod_consumer(bound)],
        "the scheduler's reservation",
    )
    assert claim["status"]["allocation"]["devices"]["results"][0]["driver"] == driver_name
    assert DELETE_PROTECTION_FINALIZER in finalizers(claim)

    # Scenario 16: the pod completes; release, then finalizer, then deletion, in this order.
    history = ObjectHistory(cluster, "resourceclaims", namespace, name)
    wait_for(history.events, TIMEOUT, "the claim watch to start")
    set_phase(api, namespace, "bound", "Succeeded")
    wait_for(
        lambda: api.get_or_none(claims_path(namespace, name)) is None, TIMEOUT, "the claim to be deleted"
    )
    wait_for(lambda: history.events()[-1]["type"] == "DELETED", 10, "the DELETED watch event")
    changes = [(e["type"], e["object"]) for e in history.stop()[1:]]
    assert [kind for kind, _ in changes] == ["MODIFIED", "MODIFIED", "DELETED"], changes
    released, unprotected = changes[0][1], changes[1][1]
    assert not reserved_for(released)
    assert "allocation" not in released.get("status", {})
    assert DELETE_PROTECTION_FINALIZER in finalizers(released)
    assert not finalizers(unprotected)

    def quiet_state() -> dict[str, Any]:
        p14 = api.get(claims_path(namespace, "shared14"))
        p15 = api.get(claims_path(namespace, "shared15"))
        return {
            "two": api.get(pods_path(namespace, "two"))["metadata"]["resourceVersion"],
            "user-pod": api.get(pods_path(namespace, "user"))["metadata"]["resourceVersion"],
            "user-claims": [
                c["metadata"]["name"] for c in claims(api, namespace) if "user" in c["metadata"]["name"]
            ],
            "user-events": pod_events(api, namespace, "user"),
            "shared14": (p14["metadata"]["resourceVersion"], reserved_for(p14)),
            "shared15": (p15["metadata"]["resourceVersion"], reserved_for(p15)),
            "bound-claims": claims_of_pod(api, namespace, bound),
        }

    state = assert_unchanged(quiet_state, QUIET_PERIOD, "the settled scenarios 4, 8, 14, 15 and 16")
    assert state["user-claims"] == []
    assert state["user-events"] == []
    assert state["shared14"][1] == []
    assert state["shared15"][1] == [pod_consumer(q)], "a terminal pod is never reserved (scenario 15)"
    assert state["bound-claims"] == [], "a completed pod's claim is not re-created (scenario 16)"
    assert api.get(pods_path(namespace, "p14"))["status"]["phase"] == "Pending"
    assert OUR_MANAGER not in [m for m, _, _ in status_managers(api.get(pods_path(namespace, "user")))]

    s04_replace_deleted_claim(ctx, two)
    s08_user_creates_claim(ctx)
    assert_unchanged(lambda: claim_statuses(api, namespace, "user"), 3, "the user-claim pod's status")
    assert claim_statuses(api, namespace, "user") == []
    assert_no_foreign_state(api, [namespace])


def test_release_and_cleanup(
    api: Kube,
    namespace: str,
    rc: harness.RunningOperator,
    objects: Tracker,
    unique_name: Callable[[str], str],
) -> None:
    """Scenarios 12, 17-27: reservations of pods that are gone, replaced or done are
    released, last consumers deallocate, and generated claims of finished pods go."""
    node = unique_name("node")
    objects.node(node)
    ctx = Ctx(api, namespace, node)
    common_template(ctx)
    s27_allocated_unused(ctx)
    s17_18_shared_claim(ctx)
    s19_20_23_foreign_entries(ctx)
    s25_extended_resource_claim(ctx)
    s26_claim_being_deleted(ctx)
    s12_claim_no_longer_owned(ctx)
    s21_deleted_before_scheduling(ctx)
    s22_deleted_while_scheduled(ctx)
    s24_replaced_pod(ctx)
    s27_check(ctx)
    assert_unchanged(
        lambda: api.get(claims_path(namespace, "shared19"))["metadata"]["resourceVersion"],
        3,
        "the claim with foreign entries",
    )
    assert_no_foreign_state(api, [namespace])


@pytest.mark.parametrize("form", sorted(RAW_PARAMETERS))
def test_user_claims_keep_their_raw_parameters_through_release(
    api: Kube,
    namespace: str,
    rc: harness.RunningOperator,
    objects: Tracker,
    unique_name: Callable[[str], str],
    form: str,
) -> None:
    """A claim whose opaque parameters are stored in a form Go's JSON encoder would not write
    (kube-apiserver compares them byte for byte on update) is reserved, released, deallocated and
    deleted like any other, and its parameters are never rewritten."""
    node = unique_name("node")
    objects.node(node)
    s29_raw_parameters(Ctx(api, namespace, node), form)
    assert rc.ready()


# The field managers of kube-controller-manager's writes the coexistence guard knows.
IN_TREE_MANAGERS = ("kube-controller-manager", "ResourceClaimController", "device-taint-eviction-controller")


def test_a_tenant_cannot_switch_the_operator_off(
    api: Kube, cluster: harness.Cluster, namespace: str, rc: harness.RunningOperator
) -> None:
    """Issue #38: a tenant allowed only to create claims and pods in its namespace writes claims
    under every field manager of the in-tree controller, and a pod carrying the in-tree
    controller's status entry; the operator stays ready and a pod created afterwards gets its
    claim."""
    tenant = "tenant"
    api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": tenant}})
    rules = [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims"],
            "verbs": ["create", "get", "update", "patch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get"]},
    ]
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    api.create(f"{rbac}/namespaces/{namespace}/roles", {"metadata": {"name": tenant}, "rules": rules})
    api.create(
        f"{rbac}/namespaces/{namespace}/rolebindings",
        {
            "metadata": {"name": tenant},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": tenant},
            "subjects": [{"kind": "ServiceAccount", "name": tenant, "namespace": namespace}],
        },
    )
    as_tenant = Kube(harness.token_kubeconfig(cluster, api, namespace, tenant))
    try:
        for manager in IN_TREE_MANAGERS:
            body = claim_body(f"forged-{manager.lower()}")
            body["metadata"]["annotations"] = {POD_CLAIM_NAME: "gpu"}
            as_tenant.request("POST", claims_path(namespace), body=body, params={"fieldManager": manager})
            as_tenant.request(
                "PATCH",
                claims_path(namespace, body["metadata"]["name"]),
                body={**body, "metadata": {**body["metadata"], "labels": {"forged": "true"}}},
                content_type="application/apply-patch+yaml",
                params={"fieldManager": manager, "force": "true"},
            )
        # kube-apiserver keeps the managedFields sent with a pod: the in-tree controller's status
        # apply, forged, only makes the operator ask its probe again, which nobody answers here.
        forged = pod_body("forged-status-entry", [])
        forged["metadata"]["managedFields"] = [
            {
                "manager": "ResourceClaimController",
                "operation": "Apply",
                "apiVersion": "v1",
                "subresource": "status",
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60)),
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:resourceClaimStatuses": {}}},
            }
        ]
        kept = as_tenant.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=forged)
        assert "ResourceClaimController" in [e["manager"] for e in kept["metadata"]["managedFields"]]
        wait_for(lambda: "another client wrote the signature seen" in rc.log(), 30, "the probe's answer")
        create_template(api, namespace, template_body("gpu-tmpl"))
        pod = create_pod(api, namespace, pod_body("after-forgery", [template_entry("gpu", "gpu-tmpl")]))
        wait_generated(api, namespace, pod, "gpu")
        assert rc.ready(), "forged claims and status entries are no evidence of the in-tree controller"
        assert harness.in_tree_detected(rc.metrics()) == ()
    finally:
        as_tenant.close()


def _wait_rejection(api: Kube, ns: str, pod: str, pattern: str) -> dict[str, Any]:
    """The creation Warning whose message matches ``pattern`` in full."""

    def found() -> dict[str, Any] | None:
        for event in pod_events(api, ns, pod):
            if event["reason"] == FAILED_CREATION and re.fullmatch(pattern, event["message"]):
                return event
        return None

    event = wait_value(found, TIMEOUT, f"the {FAILED_CREATION} Event of {pod}")
    assert event["type"] == "Warning"
    assert event["source"]["component"] == OUR_MANAGER
    assert event["reportingComponent"] == OUR_MANAGER
    return event


def test_rejected_creates_keep_operator_healthy(
    api: Kube,
    namespace: str,
    rc: harness.RunningOperator,
    objects: Tracker,
    request: pytest.FixtureRequest,
) -> None:
    """Scenarios 6 and 7, and a template the apiserver accepts but whose claims an
    admission policy rejects: each gives its Event, the operator stays ready, other
    namespaces go on, and fixing the cause lets the next retry create the claim."""
    ns_path = f"/api/v1/namespaces/{namespace}"
    prefix = re.escape("PodResourceClaim gpu: create ResourceClaim : ")

    # Scenario 6: the template needs the label when it is created; the claim, later, too.
    api.patch(ns_path, {"metadata": {"labels": {ADMIN_LABEL: "true"}}})
    create_template(api, namespace, template_body("admin-tmpl", admin_access=True))
    api.patch(ns_path, {"metadata": {"labels": {ADMIN_LABEL: None}}})
    failures_before = creates(rc, "failure", "true")
    admin = create_pod(api, namespace, pod_body("admin", [template_entry("gpu", "admin-tmpl")]))
    _wait_rejection(
        api,
        namespace,
        "admin",
        prefix
        + re.escape("ResourceClaim.resource.k8s.io ")
        + f'"admin-gpu-{GENERATED_SUFFIX}"'
        + re.escape(" is invalid: spec.devices.requests[0].adminAccess: Forbidden: " + ADMIN_MESSAGE),
    )
    assert creates(rc, "failure", "true") > failures_before
    assert rc.ready()
    # Fixing the cause lets the next retry create the claim. Nothing the operator watches
    # changes, so this relies on the retry, whose backoff is still short at this point.
    api.patch(ns_path, {"metadata": {"labels": {ADMIN_LABEL: "true"}}})
    wait_generated(api, namespace, admin, "gpu")

    # Scenario 7, in a namespace of its own: quota 0 for claims.
    quota_ns = make_namespace(api, request)
    other_ns = make_namespace(api, request)
    try:
        quota_path = f"/api/v1/namespaces/{quota_ns}/resourcequotas"
        api.create(
            quota_path,
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "no-claims"},
                "spec": {"hard": {"count/resourceclaims.resource.k8s.io": "0"}},
            },
        )
        wait_for(
            lambda: api.get(f"{quota_path}/no-claims").get("status", {}).get("hard"),
            TIMEOUT,
            "the quota to be in force",
        )
        common_template(Ctx(api, quota_ns, ""))
        quota_pod = create_pod(api, quota_ns, pod_body("quota", [template_entry("gpu", "gpu-tmpl")]))
        resource = re.escape("count/resourceclaims.resource.k8s.io")
        _wait_rejection(
            api,
            quota_ns,
            "quota",
            prefix
            + re.escape("resourceclaims.resource.k8s.io ")
            + f'"quota-gpu-{GENERATED_SUFFIX}"'
            + f" is forbidden: exceeded quota: no-claims, requested: {resource}=1, used: {resource}=0, "
            + f"limited: {resource}=0",
        )
        # Other namespaces are unaffected.
        common_template(Ctx(api, other_ns, ""))
        elsewhere = create_pod(api, other_ns, pod_body("elsewhere", [template_entry("gpu", "gpu-tmpl")]))
        wait_generated(api, other_ns, elsewhere, "gpu")
        assert rc.ready()
        api.patch(
            f"{quota_path}/no-claims", {"spec": {"hard": {"count/resourceclaims.resource.k8s.io": "5"}}}
        )
        wait_generated(api, quota_ns, quota_pod, "gpu")

        # A template whose claims an admission policy rejects.
        _reject_labelled_claims(api, objects, namespace)
        create_template(api, namespace, template_body("reject-tmpl", labels={REJECT_LABEL: "true"}))
        create_pod(api, namespace, pod_body("rejected", [template_entry("gpu", "reject-tmpl")]))
        _wait_rejection(
            api,
            namespace,
            "rejected",
            prefix
            + re.escape("resourceclaims.resource.k8s.io ")
            + f'"rejected-gpu-{GENERATED_SUFFIX}"'
            + re.escape(" is forbidden: ValidatingAdmissionPolicy ")
            + ".*"
            + re.escape("denied request: claims labelled for rejection are refused"),
        )
        assert rc.ready()
        assert rc.alive()
    finally:
        cleanup_namespace(api, quota_ns)
        cleanup_namespace(api, other_ns)
    assert rc.ready()


def _reject_labelled_claims(api: Kube, objects: Tracker, namespace: str) -> None:
    """A ValidatingAdmissionPolicy that refuses claims with the reject label in ``namespace``."""
    name = f"reject-{namespace}"
    objects.create(
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["resource.k8s.io"],
                            "apiVersions": ["*"],
                            "operations": ["CREATE"],
                            "resources": ["resourceclaims"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": (
                            f"!has(object.metadata.labels) || !('{REJECT_LABEL}' in object.metadata.labels)"
                        ),
                        "message": "claims labelled for rejection are refused",
                    }
                ],
            },
        },
    )
    objects.create(
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    )
    probe = claim_body("probe")
    probe["metadata"]["labels"] = {REJECT_LABEL: "true"}

    def refused() -> bool:
        try:
            api.request("POST", claims_path(namespace), params={"dryRun": "All"}, body=probe)
        except ApiError as err:
            return "claims labelled for rejection are refused" in err.message
        return False

    wait_for(refused, TIMEOUT, "the admission policy to be in force")


def test_late_template_and_final_state(
    api: Kube,
    rc: harness.RunningOperator,
    waiting_pod: tuple[Ctx, dict[str, Any], float],
) -> None:
    """Scenarios 5 and 29, completed at least 60 s after the pod; then 33 and 34."""
    ctx, pod, since = waiting_pod

    def warnings() -> list[dict[str, Any]]:
        return [e for e in pod_events(api, ctx.ns, "waiting") if e["message"] == MISSING_TEMPLATE_MESSAGE]

    wait_for(
        lambda: time.monotonic() - since >= LATE_TEMPLATE_AFTER and warnings(),
        LATE_TEMPLATE_AFTER + 10,
        "60 s of waiting for the template",
    )
    events = warnings()
    assert len(events) == 1, "one Event object; repetitions only raise its count"
    assert events[0]["count"] > 1
    assert events[0]["type"] == "Warning"
    assert events[0]["reason"] == FAILED_CREATION
    assert events[0]["source"]["component"] == OUR_MANAGER
    assert not claims(api, ctx.ns)

    created = time.monotonic()
    claim = s05_create_template(ctx, pod, within=5)
    assert time.monotonic() - created <= 5
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"

    # Scenario 34: the metrics after scenarios 1 and 6.
    text = rc.metrics()
    assert metric(text, CREATES, status="success", admin_access="false", **POD_OWNER)
    assert metric(text, CREATES, status="failure", admin_access="true", **POD_OWNER)
    gauge = "dra_operators_resourceclaim_resource_claims"
    assert (
        metric(text, gauge, allocated="false", admin_access="false", source="resource_claim_template") or 0
    ) >= 1
    assert metric(text, "dra_operators_workqueue_depth", name="resourceclaim") is not None

    # Scenario 33, on everything that is left in the cluster.
    assert_no_foreign_state(api)
    assert rc.ready()
    assert "Traceback" not in rc.log(), rc.log()[-5000:]
