"""scale: what the size of a cluster costs the operators that watch its pods (issue #23).

For each size N, a cluster of fake nodes gets N pods in all: 88 % plain pods (no DRA, bound to a
node as if scheduled), 10 % with a claim from a template and 2 % on shared ResourceClaims (ten
pods a claim). The same workload runs twice in one bench run: with kube-controller-manager's
in-tree DRA controllers, then with them off and our resourceclaim, devicetaint and
bindingattacher running, each its own process under its own RBAC, at the default client limits
(20 QPS, burst 30) on both sides. Phases, each followed by waiting until every measured process
is idle:

1. **plain**: the plain pods are created. CPU per 1000 pod events of plain pods is the
   controllers' CPU over the phase divided by the pod events a watch of the namespace received
   (what every pod watcher receives); RSS growth per 10 000 plain pods from the same phase.
2. **dra**: the template and shared-claim pods are created; the clock runs until every template
   pod's status records its claim. Then the steady RSS, and the objects each cache holds.
3. **churn**: every remaining plain pod's status is patched once, as a kubelet would, while 10 %
   of all pods are deleted and re-created under new names; the clock runs until every re-created
   template pod's status records its claim.

kube-controller-manager's in-tree DRA share is its CPU in the upstream run less its CPU in ours.
The claim templates name a DeviceClass that does not exist, so kube-scheduler only marks the DRA
pods unschedulable, the same extra load on both sides. ``BENCH_SCALE_SIZES=5000,20000`` picks sizes.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from devcluster import launcher
from devcluster.constants import PLACEHOLDER_IMAGE, REPO_ROOT
from devcluster.kube import Kube, wait_for
from devcluster.nodes import node_body
from e2e import harness
from e2e.bench.env import (
    DEFAULT_KCM,
    Result,
    bounded_gather,
    devcluster,
    interleave,
    our_operator,
    run_async,
    status_kib,
)
from e2e.bench.watch import FirstSeen, Watches, watching
from operators.core.client import STRATEGIC_MERGE_PATCH, KubeClient

SIZES = tuple(int(size) for size in os.environ.get("BENCH_SCALE_SIZES", "5000,20000,50000").split(","))
OPERATORS = ("resourceclaim", "devicetaint", "bindingattacher")
KCM = "kube-controller-manager"
OPERATOR_ARGS = ("--kube-api-qps=20", "--kube-api-burst=30")
NAMESPACE = "bench-scale"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
TEMPLATE_SHARE = 0.10
SHARED_SHARE = 0.02
PODS_PER_SHARED_CLAIM = 10
PODS_PER_NODE = 100
CHURN_EVERY = 10
# A phase ends once every measured process uses less than this share of a core over IDLE_WINDOW.
IDLE_SHARE = 0.05
IDLE_WINDOW = 3.0
PHASE_TIMEOUT = 1800.0


@dataclass(frozen=True)
class Workload:
    size: int

    @property
    def templated(self) -> int:
        return round(self.size * TEMPLATE_SHARE)

    @property
    def shared(self) -> int:
        return round(self.size * SHARED_SHARE)

    @property
    def plain(self) -> int:
        return self.size - self.templated - self.shared

    @property
    def shared_claims(self) -> int:
        return math.ceil(self.shared / PODS_PER_SHARED_CLAIM)

    @property
    def nodes(self) -> int:
        return math.ceil(self.size / PODS_PER_NODE)

    def plain_names(self) -> list[str]:
        return [f"plain-{i:05d}" for i in range(self.plain)]

    def templated_names(self) -> list[str]:
        return [f"tmpl-{i:05d}" for i in range(self.templated)]

    def shared_names(self) -> list[str]:
        return [f"shared-{i:05d}" for i in range(self.shared)]


def _node(i: int) -> str:
    return f"scale-node-{i:04d}"


def _pod(name: str, node: str | None, claim: dict[str, str] | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": PLACEHOLDER_IMAGE}
    spec: dict[str, Any] = {"containers": [container]}
    if node is not None:
        spec["nodeName"] = node
    if claim is not None:
        container["resources"] = {"claims": [{"name": "gpu"}]}
        spec["resourceClaims"] = [{"name": "gpu", **claim}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name.split("-")[0], "bench": "scale"}},
        "spec": spec,
    }


def _plain_pod(w: Workload, name: str, i: int) -> dict[str, Any]:
    return _pod(name, _node(i % w.nodes), None)


def _templated_pod(name: str) -> dict[str, Any]:
    return _pod(name, None, {"resourceClaimTemplateName": "scale"})


def _shared_pod(name: str, i: int) -> dict[str, Any]:
    return _pod(name, None, {"resourceClaimName": f"shared-{i // PODS_PER_SHARED_CLAIM:04d}"})


def _claim_spec() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "scale-absent"}}]}}


async def _setup(client: KubeClient, w: Workload) -> None:
    await client.create(
        f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "scale"},
            "spec": {"spec": _claim_spec()},
        },
    )
    creates = [functools.partial(client.create, "/api/v1/nodes", node_body(_node(n))) for n in range(w.nodes)]
    creates += [
        functools.partial(
            client.create,
            CLAIMS,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"shared-{c:04d}"},
                "spec": _claim_spec(),
            },
        )
        for c in range(w.shared_claims)
    ]
    await bounded_gather(creates)


async def _create(client: KubeClient, bodies: list[dict[str, Any]]) -> None:
    await bounded_gather([functools.partial(client.create, PODS, body) for body in bodies])


def _dra_bodies(w: Workload) -> list[dict[str, Any]]:
    templated = [_templated_pod(name) for name in w.templated_names()]
    shared = [_shared_pod(name, i) for i, name in enumerate(w.shared_names())]
    return interleave(templated, shared)


def _kubelet_status() -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
            "startTime": now,
        }
    }


async def _churn(client: KubeClient, w: Workload) -> None:
    plain = w.plain_names()
    gone_plain = {name for i, name in enumerate(plain) if i % CHURN_EVERY == 0}
    gone_templated = [name for i, name in enumerate(w.templated_names()) if i % CHURN_EVERY == 0]
    gone_shared = [(i, name) for i, name in enumerate(w.shared_names()) if i % CHURN_EVERY == 0]
    node_of = {name: i for i, name in enumerate(plain)}

    async def replace(name: str, body: dict[str, Any]) -> None:
        await client.delete(f"{PODS}/{name}", gracePeriodSeconds="0")
        await client.create(PODS, body)

    status = _kubelet_status()
    work: list[Callable[[], Any]] = []
    for name in plain:
        if name in gone_plain:
            work.append(functools.partial(replace, name, _plain_pod(w, f"{name}-r", node_of[name])))
        else:
            work.append(
                functools.partial(client.patch, f"{PODS}/{name}/status", status, STRATEGIC_MERGE_PATCH)
            )
    # The DRA replacements are spread through the status patches, so their claims are made
    # while the churn runs.
    spread = max(1, len(work) // max(1, len(gone_templated) + len(gone_shared)))
    dra = [functools.partial(replace, name, _templated_pod(f"{name}-r")) for name in gone_templated]
    dra += [functools.partial(replace, name, _shared_pod(f"{name}-r", i)) for i, name in gone_shared]
    for k, item in enumerate(dra):
        work.insert(min(len(work), k * (spread + 1)), item)
    await bounded_gather(work)


# --- Measuring processes -------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    return round(status_kib(pid, "VmRSS") / 1024, 1)


def peak_rss_mib(pid: int) -> float:
    return round(status_kib(pid, "VmHWM") / 1024, 1)


def cpu(pids: Mapping[str, int]) -> dict[str, float]:
    return {name: launcher.cpu_seconds(pid) for name, pid in pids.items()}


class _Idle:
    """True once every process used under IDLE_SHARE of a core since the previous call."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self.pids = pids
        self.last, self.at = cpu(pids), time.monotonic()
        self.busy: dict[str, float] = {}

    def __call__(self) -> bool:
        now, at = cpu(self.pids), time.monotonic()
        span = at - self.at
        if span < IDLE_WINDOW * 0.9:
            return False
        self.busy = {name: round((now[name] - self.last[name]) / span, 3) for name in self.pids}
        self.last, self.at = now, at
        return all(share < IDLE_SHARE for share in self.busy.values())


def wait_idle(pids: Mapping[str, int], what: str) -> None:
    idle = _Idle(pids)
    wait_for(idle, PHASE_TIMEOUT, f"idle after {what}", interval=IDLE_WINDOW)


@dataclass
class PodWatch:
    """Counts the namespace's pod events and which pods were seen, and times claim statuses."""

    recorded: FirstSeen = field(
        default_factory=lambda: FirstSeen(
            lambda pod: bool((pod.get("status") or {}).get("resourceClaimStatuses"))
        )
    )
    events: int = 0
    seen: set[str] = field(default_factory=set)

    def saw(self, watches: Watches, count: int) -> bool:
        watches.check()
        return len(self.seen) >= count

    def __call__(self, body: dict[str, Any], now: float, wall: float) -> None:
        self.events += 1
        self.seen.add(body["metadata"]["name"])
        if body["metadata"]["name"].startswith("tmpl-"):
            self.recorded(body, now, wall)


@dataclass
class Side:
    """One run's figures: per process, per phase."""

    values: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _processes(
    cluster: harness.Cluster, api: Kube, upstream: bool
) -> Iterator[tuple[dict[str, int], dict[str, harness.RunningOperator]]]:
    components = cluster.state.components if cluster.state is not None else {}
    pids = {KCM: components[KCM].pid}
    ops: dict[str, harness.RunningOperator] = {}
    with contextlib.ExitStack() as stack:
        if not upstream:
            for name in OPERATORS:
                op = stack.enter_context(our_operator(cluster, api, name, OPERATOR_ARGS))
                assert op.process is not None
                pids[name], ops[name] = op.process.pid, op
        yield pids, ops


def _cache_counts(ops: Mapping[str, harness.RunningOperator]) -> dict[str, float]:
    """The pods each operator's cache holds, from its own metric: only DRA pods belong there."""
    counts: dict[str, float] = {}
    for name, op in ops.items():
        held = harness.metric(op.metrics(), "dra_operators_cached_objects", resource="pods")
        if held is not None:
            counts[f"{name}_cached_pods"] = held
    return counts


def _side(w: Workload, upstream: bool) -> Side:
    side = Side()
    v = side.values
    started = time.monotonic()
    with devcluster(upstream=upstream, kcm_args=DEFAULT_KCM) as cluster:
        api = Kube(cluster.kubeconfig)
        try:
            cluster.kubectl("apply", "--server-side", "-k", str(REPO_ROOT / "crds"))
            api.create(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            wait_for(
                lambda: api.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"), 60, "SA"
            )
            with _processes(cluster, api, upstream) as (pids, ops):
                run_async(functools.partial(_setup, w=w), api.kubeconfig)
                watch = PodWatch()
                with watching(api.kubeconfig, {PODS: watch}) as watches:
                    wait_idle(pids, "setup")
                    baseline = {name: rss_mib(pid) for name, pid in pids.items()}

                    # 1. plain
                    cpu0, events0 = cpu(pids), watch.events
                    run_async(
                        functools.partial(
                            _create, bodies=[_plain_pod(w, name, i) for i, name in enumerate(w.plain_names())]
                        ),
                        api.kubeconfig,
                    )
                    wait_for(functools.partial(watch.saw, watches, w.plain), PHASE_TIMEOUT, "plain pods")
                    wait_idle(pids, "the plain pods")
                    cpu1, events1 = cpu(pids), watch.events
                    plain_events = events1 - events0
                    v["plain_pod_events"] = plain_events
                    for name, pid in pids.items():
                        spent = cpu1[name] - cpu0[name]
                        v[f"{name}_cpu_ms_per_plain_event"] = round(1000 * spent / max(1, plain_events), 4)
                        grown = rss_mib(pid) - baseline[name]
                        v[f"{name}_plain_growth_mib_per_10k"] = round(grown * 10000 / max(1, w.plain), 2)

                    # 2. dra
                    creator = threading.Thread(
                        target=run_async,
                        args=(functools.partial(_create, bodies=_dra_bodies(w)), api.kubeconfig),
                    )
                    clock = time.monotonic()
                    creator.start()
                    finished = watch.recorded.wait(
                        watches, w.templated, PHASE_TIMEOUT, "template pods' claims"
                    )
                    creator.join()
                    v["claims_seconds"] = round(finished - clock, 2)
                    wait_idle(pids, "the DRA pods")
                    cpu2 = cpu(pids)
                    for name, pid in pids.items():
                        v[f"{name}_cpu_s_per_1000_dra_pods"] = round(
                            1000 * (cpu2[name] - cpu1[name]) / (w.templated + w.shared), 3
                        )
                        v[f"{name}_steady_rss_mib"] = rss_mib(pid)
                        v[f"{name}_growth_mib"] = round(rss_mib(pid) - baseline[name], 1)
                        v[f"{name}_baseline_rss_mib"] = baseline[name]
                    v.update(_cache_counts(ops))

                    # 3. churn
                    churned = [
                        f"{name}-r" for i, name in enumerate(w.templated_names()) if i % CHURN_EVERY == 0
                    ]
                    before = len(watch.recorded.at)
                    clock = time.monotonic()
                    churner = threading.Thread(
                        target=run_async, args=(functools.partial(_churn, w=w), api.kubeconfig)
                    )
                    churner.start()
                    finished = watch.recorded.wait(
                        watches, before + len(churned), PHASE_TIMEOUT, "re-created template pods' claims"
                    )
                    churner.join()
                    v["churn_claims_seconds"] = round(finished - clock, 2)
                    v["churn_pod_events"] = watch.events - events1
                    wait_idle(pids, "the churn")
                    cpu3 = cpu(pids)
                    for name, pid in pids.items():
                        v[f"{name}_cpu_s_churn"] = round(cpu3[name] - cpu2[name], 2)
                        v[f"{name}_cpu_s_total"] = round(cpu3[name] - cpu0[name], 2)
                        v[f"{name}_peak_rss_mib"] = peak_rss_mib(pid)
                        v[f"{name}_final_rss_mib"] = rss_mib(pid)
                    who = "upstream" if upstream else "ours"
                    side.notes.append(f"{who}: the bench's watch listed again {watches.stats.relists} times")
        finally:
            api.close()
    v["wall_seconds"] = round(time.monotonic() - started, 1)
    return side


# kube-controller-manager's in-tree DRA share of a figure: its value in the upstream run less its
# value in ours, where the DRA controllers are off.
IN_TREE_SHARES = ("cpu_ms_per_plain_event", "cpu_s_per_1000_dra_pods", "cpu_s_total", "growth_mib")


def _result(w: Workload, upstream: Side, ours: Side) -> Result:
    result = Result("scale", f"N={w.size}")
    result.upstream.update(upstream.values)
    result.ours.update(ours.values)
    for figure in IN_TREE_SHARES:
        with_dra, without = upstream.values.get(f"{KCM}_{figure}"), ours.values.get(f"{KCM}_{figure}")
        if with_dra is not None and without is not None:
            result.upstream[f"in_tree_dra_{figure}"] = round(with_dra - without, 4)
    result.notes.append(
        f"{w.size} pods: {w.plain} plain on {w.nodes} fake nodes, {w.templated} from a template, "
        f"{w.shared} on {w.shared_claims} shared claims; default client limits (20 QPS, burst 30)"
    )
    result.notes.extend(upstream.notes + ours.notes)
    return result


def run() -> list[Result]:
    results = []
    for size in SIZES:
        w = Workload(size)
        try:
            print(f"--> scale N={size}: upstream", flush=True)
            upstream = _side(w, upstream=True)
            print(f"--> scale N={size}: ours", flush=True)
            ours = _side(w, upstream=False)
            results.append(_result(w, upstream, ours))
        except Exception as err:  # a size that does not fit must not lose the smaller ones
            failed = Result("scale", f"N={size}")
            failed.notes.append(f"did not complete: {type(err).__name__}: {err}"[:1000])
            results.append(failed)
    return results
