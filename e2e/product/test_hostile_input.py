"""Hostile input at the API's own limits (issue #26): objects kube-apiserver 1.37.2 accepts but
that are as large, as long or as expensive as it allows, while all five operators run, each as a
subprocess under its own ServiceAccount.

Every operator must stay Ready the whole time, judged as the shipped Deployment's readiness
probe judges it (its period, a 1 s timeout, three failures in a row), and keep its peak RSS
(VmHWM) under the memory limit of its Deployment; each object gets its answer, or a condition or
Event that says why not. The peaks are printed and written to test-artifacts/hostile-input.json.

The limits exercised, from k8s.io/api resource/v1 and core validation:

- names of 253 characters where the kind allows (slices, classes, rules, templates, pods, the
  project's kinds), label keys of 253 + 63 and values of 63 characters, driver names of 63;
- 128 devices per slice (ResourceSliceMaxDevices), 1000 slices in one pool, 1000 pools of one
  driver, each named with 253 characters, and a pool status request with ``limit: 1000``. The
  2000 slices take 7-14 s to create on a shared 2-core machine (140-280 a second) and one
  collection DELETE to remove, so the issue's full counts are used;
- 8 shared counter sets of 32 counters, and 64 devices (the limit with counters) that each
  consume 2 sets of 32 counters;
- CEL selectors of 9-10 KiB that kube-apiserver admits but that are expensive to evaluate, in a
  DeviceClass and in DeviceTaintSelectors, and a selector with 32 expressions of 10 KiB;
- 1000 DeviceTaintRules at once;
- a pod with 256 claims from one template: core validation sets no maximum on a pod's
  resourceClaims, so 256 (what a claim's reservedFor holds) stands for "many";
- opaque parameters nested 5 000 levels deep (10 KiB, their size limit);
- 2000 pods created within a minute whose template is missing, each a FailedResourceClaimCreation
  failure that resourceclaim retries with back-off.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from devcluster import launcher
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.bench.env import bounded_gather, run_async, status_kib
from e2e.bindingattacher import world as attacher
from e2e.poolstatus import support as poolstatus
from e2e.resourceclaim.support import (
    FAILED_CREATION,
    claims_path,
    pod_body,
    pods_path,
    template_body,
    template_entry,
    templates_path,
)
from e2e.support import ARTIFACTS
from e2e.taintselector import support as taintselector
from operators.core import wirejson
from operators.core.client import KubeClient

pytestmark = [pytest.mark.timeout(900)]

OPERATORS = ("resourceclaim", "devicetaint", "poolstatus", "bindingattacher", "taintselector")
RESOURCE = "/apis/resource.k8s.io/v1"
SLICES = f"{RESOURCE}/resourceslices"
CLASSES = f"{RESOURCE}/deviceclasses"
RULES = f"{RESOURCE}/devicetaintrules"
NAME_MAX = 253
LABEL_MAX = 63
DEVICES_PER_SLICE = 128
DEVICES_WITH_COUNTERS = 64
BIG_POOL_SLICES = 1000
POOLS = 1000
RULE_COUNT = 1000
POD_CLAIMS = 256
FAILING_PODS = 2000
DEEP_PARAMETERS = 5000
"""Levels of nesting in 10 KiB of opaque parameters (``[`` and ``]`` each), the API's size limit."""
CONDITION_MESSAGE_MAX = 32768
RUN = uuid.uuid4().hex[:6]
DRIVER = f"h{RUN}-" + "d" * (LABEL_MAX - 8)
# The label every object of this module carries: a key of 253 + 63 characters, a value of 63.
LABEL_KEY = f"{'k' * 61}.{'k' * 63}.{'k' * 63}.{'k' * 63}/{'n' * LABEL_MAX}"
LABEL_VALUE = f"h{RUN}" + "v" * (LABEL_MAX - 7)
LABELS = {LABEL_KEY: LABEL_VALUE}
SELECTOR = f"{LABEL_KEY}={LABEL_VALUE}"


def long_name(prefix: str, length: int = NAME_MAX) -> str:
    """A DNS subdomain of exactly ``length`` characters starting with ``prefix`` (no dot in it),
    in labels of at most 63 characters."""
    chars = list((f"{prefix}-" + "x" * length)[:length])
    for dot in range(LABEL_MAX, length - 1, LABEL_MAX + 1):
        chars[dot] = "."
    return "".join(chars)


def device_name(i: int) -> str:
    return f"dev-{i:06d}-" + "x" * (LABEL_MAX - 11)


def meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": dict(LABELS)}


def slice_body(
    name: str, pool: str, devices: Sequence[Mapping[str, Any]], count: int, **spec: Any
) -> dict[str, Any]:
    body = poolstatus.slice_body(name, DRIVER, pool, devices, count=count, **spec)
    body["metadata"] = meta(name)
    return body


def plain_devices(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"name": device_name(start + i)} for i in range(count)]


# -- the operators and their watchdog --------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What the shipped Deployment allows an operator: its memory limit, its readiness probe."""

    memory_kib: int
    probe_period: float
    probe_timeout: float
    failure_threshold: int


def deployment_limits(operator: str) -> Limits:
    path = REPO_ROOT / "manifests" / operator / "deployment.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Deployment"]
    container = docs[0]["spec"]["template"]["spec"]["containers"][0]
    memory = container["resources"]["limits"]["memory"]
    match = re.fullmatch(r"(\d+)Mi", memory)
    assert match, f"{operator}: memory limit {memory!r} is not in Mi"
    probe = container["readinessProbe"]
    return Limits(
        memory_kib=int(match.group(1)) * 1024,
        probe_period=float(probe.get("periodSeconds", 10)),
        probe_timeout=float(probe.get("timeoutSeconds", 1)),
        failure_threshold=int(probe.get("failureThreshold", 3)),
    )


@dataclass
class Watched:
    op: harness.RunningOperator
    limits: Limits
    peak_kib: int = 0
    failures_in_a_row: int = 0
    unready_since: list[str] = field(default_factory=list)
    slowest_probe: float = 0.0


class Watchdog:
    """Probes each operator's /readyz as its Deployment would and samples its peak RSS."""

    def __init__(self, ops: Mapping[str, harness.RunningOperator]) -> None:
        self.watched = {name: Watched(op, deployment_limits(name)) for name, op in ops.items()}
        self.phase = "start-up"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostile-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.sample()

    def sample(self) -> None:
        for watched in self.watched.values():
            assert watched.op.process is not None
            watched.peak_kib = max(watched.peak_kib, status_kib(watched.op.process.pid, "VmHWM"))

    def _probe(self, watched: Watched) -> None:
        started = time.monotonic()
        url = watched.op.health_url.replace("/healthz", "/readyz")
        status, _ = launcher.http_get(url, timeout=watched.limits.probe_timeout)
        watched.slowest_probe = max(watched.slowest_probe, time.monotonic() - started)
        watched.failures_in_a_row = 0 if status == 200 else watched.failures_in_a_row + 1
        if watched.failures_in_a_row == watched.limits.failure_threshold:
            watched.unready_since.append(self.phase)

    def _run(self) -> None:
        next_probe = dict.fromkeys(self.watched, 0.0)
        while not self._stop.wait(0.5):
            self.sample()
            now = time.monotonic()
            for name, watched in self.watched.items():
                if now >= next_probe[name]:
                    next_probe[name] = now + watched.limits.probe_period
                    self._probe(watched)

    def check(self) -> None:
        """Every operator alive, never unready, under its memory limit: so far."""
        self.sample()
        for name, watched in self.watched.items():
            assert watched.op.alive(), f"{name} exited; its log:\n{watched.op.log()[-3000:]}"
            assert not watched.unready_since, (
                f"{name} failed {watched.limits.failure_threshold} readiness probes in a row during "
                f"{watched.unready_since}; its log:\n{watched.op.log()[-3000:]}"
            )
            peak, limit = watched.peak_kib / 1024, watched.limits.memory_kib // 1024
            assert peak < limit, f"{name}: peak RSS {peak:.1f} MiB, limit {limit} MiB"

    def report(self) -> dict[str, dict[str, float]]:
        return {
            name: {
                "peak_rss_mib": round(w.peak_kib / 1024, 1),
                "limit_mib": w.limits.memory_kib // 1024,
                "slowest_readiness_probe_s": round(w.slowest_probe, 3),
            }
            for name, w in self.watched.items()
        }


@dataclass
class Fleet:
    ops: dict[str, harness.RunningOperator]
    watchdog: Watchdog
    timings: dict[str, float] = field(default_factory=dict)

    def phase(self, name: str) -> None:
        self.watchdog.phase = name


@pytest.fixture(scope="module")
def fleet(
    request: pytest.FixtureRequest,
    cluster: harness.Cluster,
    api: Kube,
    operator_identity: Callable[[str], str],
) -> Iterator[Fleet]:
    taintselector.install_crd(cluster)
    poolstatus.install_crd(cluster)
    attacher.install_crds(cluster, api)
    extra = {"bindingattacher": ("--enable-test-actions",)}
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        ops = {
            name: stack.enter_context(
                harness.operator_running(
                    name, operator_identity(name), cluster.workdir, "subprocess", extra.get(name, ())
                )
            )
            for name in OPERATORS
        }
        with Watchdog(ops) as watchdog:
            fleet = Fleet(ops, watchdog)
            try:
                yield fleet
            finally:
                fleet.timings["module_seconds"] = round(time.monotonic() - started, 1)
        peaks = watchdog.report()
        report = {"operators": peaks, "timings": fleet.timings}
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "hostile-input.json").write_text(json.dumps(report, indent=2) + "\n")
        lines = ["hostile input: peak RSS per operator (MiB, limit):"]
        lines += [f"  {name:16} {v['peak_rss_mib']:7.1f} / {v['limit_mib']}" for name, v in peaks.items()]
        lines.append(f"hostile input: timings {fleet.timings}")
        # Shown even when the output of passing tests is captured: the peaks are what is reported.
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            print("\n" + "\n".join(lines))


@pytest.fixture(autouse=True)
def _still_healthy(fleet: Fleet, request: pytest.FixtureRequest) -> Iterator[None]:
    fleet.phase(request.node.name)
    yield
    fleet.watchdog.check()


def delete_labelled(api: Kube, *paths: str) -> None:
    for path in paths:
        api.delete(path, labelSelector=SELECTOR)


@pytest.fixture(scope="module")
def cleanup(api: Kube) -> Iterator[None]:
    yield
    delete_labelled(
        api, attacher.POLICIES, taintselector.SELECTORS, RULES, poolstatus.PROJECT.path(), CLASSES, SLICES
    )


def burst(kubeconfig: str, path: str, bodies: Sequence[Mapping[str, Any]]) -> float:
    """Create ``bodies`` concurrently; the seconds it took."""

    async def create(client: KubeClient) -> None:
        await bounded_gather([functools.partial(client.create, path, body) for body in bodies])

    started = time.monotonic()
    run_async(create, kubeconfig)
    return time.monotonic() - started


def status_of(api: Kube, path: str) -> dict[str, Any] | None:
    obj = api.get_or_none(path)
    return obj if obj and obj.get("status") else None


def request_status(api: Kube, name: str, timeout: float, **spec: Any) -> dict[str, Any]:
    body = poolstatus.request_body(poolstatus.PROJECT, name, DRIVER, **spec)
    body["metadata"] = meta(name)
    api.create(poolstatus.PROJECT.path(), body)
    found = wait_for(
        lambda: status_of(api, poolstatus.PROJECT.path(name)),
        timeout,
        f"a status on pool status request {name}",
    )
    assert found is not None
    status: dict[str, Any] = found["status"]
    return status


def selector_body(name: str, effect: str, chosen: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceTaintSelector",
        "metadata": meta(name),
        "spec": {
            "taint": {"key": taintselector.KEY, "value": "Broken", "effect": effect},
            "deviceSelector": dict(chosen),
        },
    }


# -- the shared pools --------------------------------------------------------------------------------

NAMES_POOL = long_name(f"names-{RUN}")
BIG_POOL = long_name(f"big-{RUN}")


@dataclass(frozen=True)
class BigPool:
    create_seconds: float
    slices: int
    pools: int


def _slices_seen(fleet: Fleet) -> float:
    """ResourceSlices poolstatus's watch has delivered as added."""
    text = fleet.ops["poolstatus"].metrics()
    added = harness.metric(text, "dra_operators_watch_events_total", resource="resourceslices", type="ADDED")
    return added or 0.0


@pytest.fixture(scope="module")
def big_pool(fleet: Fleet, cluster: harness.Cluster, api: Kube, cleanup: None) -> BigPool:
    """1000 slices of 128 devices in one pool, and 1000 more pools of one device each."""
    fleet.phase("creating the big pool")
    big = [
        slice_body(
            long_name(f"big-{RUN}-{i:04d}"),
            BIG_POOL,
            plain_devices(DEVICES_PER_SLICE, i * DEVICES_PER_SLICE),
            BIG_POOL_SLICES,
        )
        for i in range(BIG_POOL_SLICES)
    ]
    small = [
        slice_body(long_name(f"pool-{RUN}-{i:04d}"), long_name(f"pool-{RUN}-{i:04d}"), plain_devices(1), 1)
        for i in range(POOLS)
    ]
    before = _slices_seen(fleet)
    seconds = burst(cluster.kubeconfig, SLICES, big + small)
    # A request is answered from what poolstatus has heard, once: one asked while the watch still
    # delivers the burst would count the pools heard so far (CI answered 76 of 1001 one second on).
    created = len(big) + len(small)
    wait_for(lambda: _slices_seen(fleet) >= before + created, 120, "poolstatus to hear every slice")
    fleet.timings["slices_created"] = created
    fleet.timings["slice_create_seconds"] = round(seconds, 1)
    fleet.timings["slices_per_second"] = round((len(big) + len(small)) / seconds, 1)
    return BigPool(seconds, len(big), len(small))


# -- the tests ------------------------------------------------------------------------------------------


def test_names_and_labels_at_their_limits(fleet: Fleet, api: Kube, namespace: str, cleanup: None) -> None:
    """Every kind an operator answers, named with 253 characters and labelled at the limits."""
    device_class = long_name(f"class-{RUN}")
    api.create(
        CLASSES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": meta(device_class),
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    api.create(SLICES, slice_body(long_name(f"names-{RUN}"), NAMES_POOL, plain_devices(DEVICES_PER_SLICE), 1))
    target = {"driver": DRIVER, "pool": NAMES_POOL, "device": device_name(0)}

    # devicetaint: the condition of a rule named with 253 characters.
    rule = long_name(f"rule-{RUN}")
    api.create(
        RULES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": meta(rule),
            "spec": {
                "deviceSelector": target,
                "taint": {"key": taintselector.KEY, "value": "Broken", "effect": "NoExecute"},
            },
        },
    )
    # taintselector: a selector through a 253-character class, and the rule it writes.
    chosen = long_name(f"selector-{RUN}")
    created = api.create(
        taintselector.SELECTORS,
        selector_body(chosen, "NoSchedule", {**target, "deviceClassName": device_class}),
    )
    # Two Warning Events on one selector with a 253-character name: both must be posted.
    invalid = long_name(f"invalid-{RUN}")
    api.create(
        taintselector.SELECTORS,
        selector_body(invalid, "NoSchedule", {"deviceClassName": long_name("absent-a")}),
    )
    # poolstatus: a request named with 253 characters for a pool named with 253.
    pools = request_status(api, long_name(f"request-{RUN}"), 60, poolName=NAMES_POOL)
    assert pools["poolCount"] == 1, pools
    assert (pools["pools"][0]["poolName"], pools["pools"][0]["totalDevices"]) == (
        NAMES_POOL,
        DEVICES_PER_SLICE,
    )
    # bindingattacher: a policy named with 253 characters.
    policy = long_name(f"policy-{RUN}")
    body = attacher.testaction_policy(policy, DRIVER, "1s", attacher.FABRIC_INVENTORY)
    body["metadata"] = meta(policy)
    api.create(attacher.POLICIES, body)
    # resourceclaim: a pod named with 253 characters whose claim comes from a template named so.
    template = long_name(f"template-{RUN}")
    template_spec = template_body(template, labels=LABELS, annotations={LABEL_KEY: "a" * 1024})
    template_spec["metadata"]["labels"] = dict(LABELS)
    api.create(templates_path(namespace), template_spec)
    pod = long_name(f"pod-{RUN}")
    pod_spec = pod_body(pod, [template_entry("c" * LABEL_MAX, template)])
    pod_spec["metadata"]["labels"] = dict(LABELS)
    api.create(pods_path(namespace), pod_spec)

    def pod_answered() -> list[dict[str, Any]] | None:
        statuses = (api.get(pods_path(namespace, pod)).get("status") or {}).get("resourceClaimStatuses")
        return statuses or None

    statuses = wait_for(pod_answered, 60, "the pod's status to name its claim")
    assert statuses is not None
    claim = api.get(claims_path(namespace, statuses[0]["resourceClaimName"]))
    assert claim["metadata"]["labels"] == LABELS
    assert len(claim["metadata"]["name"]) <= LABEL_MAX

    # The driver is granted to no one, so the policy is accepted but not authorized, and says so.
    ready = attacher.wait_policy_condition(api, policy, "Ready", "NotAuthorized", 60)
    assert f"kubectl dra grant-driver {DRIVER}" in ready["message"], ready
    assert attacher.policy_condition(api, policy, "Accepted")["status"] == "True"
    taintselector.wait_condition(api, chosen, "Ready", "True", "RulesInPlace", timeout=60)
    assert taintselector.tainted(api, created["metadata"]["uid"]) == {(DRIVER, NAMES_POOL, device_name(0))}

    def rule_answered() -> dict[str, Any] | None:
        conditions = (api.get(f"{RULES}/{rule}").get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "EvictionInProgress"), None)

    answered = wait_for(rule_answered, 60, f"rule {rule} to get its EvictionInProgress condition")
    assert answered is not None
    assert (answered["status"], answered["reason"]) == ("False", "NotStarted"), answered

    taintselector.wait_condition(api, invalid, "Invalid", "True", "UnknownDeviceClass", timeout=60)
    api.patch(
        f"{taintselector.SELECTORS}/{invalid}",
        {"spec": {"deviceSelector": {"deviceClassName": long_name("absent-b")}}},
    )

    def both_events() -> list[dict[str, Any]] | None:
        events = taintselector.warning_events(api, invalid)
        return events if len(events) == 2 else None

    events = wait_for(both_events, 60, f"two InvalidSelector Events on {invalid}")
    assert events is not None
    assert all(len(e["metadata"]["name"]) <= NAME_MAX for e in events)
    # The attacher releases its finalizer: the policy goes.
    api.delete(f"{attacher.POLICIES}/{policy}")
    wait_for(lambda: api.get_or_none(f"{attacher.POLICIES}/{policy}") is None, 60, f"policy {policy} to go")


def test_a_pool_of_1000_slices_and_1000_pools(fleet: Fleet, api: Kube, big_pool: BigPool) -> None:
    """1000 slices of 128 devices in one pool, and a pool status request with ``limit: 1000``
    over 1000 more pools of the same driver."""
    fleet.phase("pool status over 1000 pools")
    started = time.monotonic()
    status = request_status(api, long_name(f"all-pools-{RUN}"), 240, limit=1000)
    fleet.timings["limit_1000_request_seconds"] = round(time.monotonic() - started, 1)
    # Each test's own pools count too: the names pool, and the counters pool once created.
    assert status["poolCount"] >= POOLS + 1, {k: v for k, v in status.items() if k != "pools"}
    listed = status["pools"]
    assert len(listed) == 1000
    assert [(p["driver"], p["poolName"]) for p in listed] == sorted(
        (p["driver"], p["poolName"]) for p in listed
    )
    big = request_status(api, long_name(f"big-pool-{RUN}"), 120, poolName=BIG_POOL)
    entry = big["pools"][0]
    assert (entry["resourceSliceCount"], entry["totalDevices"]) == (
        BIG_POOL_SLICES,
        BIG_POOL_SLICES * DEVICES_PER_SLICE,
    ), entry
    assert "validationError" not in entry, entry

    # taintselector finds one device among them all.
    name = long_name(f"one-of-many-{RUN}")
    target = {
        "driver": DRIVER,
        "pool": BIG_POOL,
        "device": device_name(BIG_POOL_SLICES * DEVICES_PER_SLICE - 1),
    }
    created = api.create(taintselector.SELECTORS, selector_body(name, "NoSchedule", target))
    taintselector.wait_condition(api, name, "Ready", "True", "RulesInPlace", timeout=120)
    assert taintselector.tainted(api, created["metadata"]["uid"]) == {tuple(target.values())}


def test_counter_sets_at_their_limits(fleet: Fleet, api: Kube, cleanup: None) -> None:
    """8 shared counter sets of 32 counters; 64 devices that each consume 2 sets of 32."""
    pool = long_name(f"counters-{RUN}")
    counter_names = [f"c{i:02d}-" + "x" * (LABEL_MAX - 4) for i in range(32)]
    sets = [
        {
            "name": f"set-{s}-" + "x" * (LABEL_MAX - 6),
            "counters": {c: {"value": "1Ti"} for c in counter_names},
        }
        for s in range(8)
    ]
    devices = [
        {
            "name": device_name(i),
            "attributes": {"profile": {"string": "slice"}},
            "consumesCounters": [
                {
                    "counterSet": sets[(i + k) % 8]["name"],
                    "counters": {c: {"value": "1Gi"} for c in counter_names},
                }
                for k in range(2)
            ],
        }
        for i in range(DEVICES_WITH_COUNTERS)
    ]
    api.create(SLICES, slice_body(long_name(f"counters-{RUN}-sets"), pool, (), 2, sharedCounters=sets))
    api.create(
        SLICES,
        slice_body(
            long_name(f"counters-{RUN}-devices"), pool, devices, 2, partitionTypeAttribute=f"{DRIVER}/profile"
        ),
    )
    status = request_status(api, long_name(f"counters-{RUN}"), 60, poolName=pool)
    entry = status["pools"][0]
    assert entry["totalDevices"] == DEVICES_WITH_COUNTERS, entry
    assert "validationError" not in entry, entry
    print(f"\ncounters pool: {json.dumps({k: v for k, v in entry.items() if k != 'poolName'})[:2000]}")


def _expensive_expression() -> str:
    """9 KiB that kube-apiserver admits (its cost estimate is under upstream's limit) and that
    evaluated to the end would take about a minute per device here."""
    inner = "[" + ",".join(str(i % 10) for i in range(4500)) + "]"
    outer = "[" + ",".join(str(i) for i in range(20)) + "]"
    return f"{outer}.all(x, {inner}.all(y, x + y >= 0))"


def test_expensive_and_oversized_cel(fleet: Fleet, api: Kube, big_pool: BigPool) -> None:
    expensive = _expensive_expression()
    device_class = long_name(f"expensive-{RUN}")
    api.create(
        CLASSES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": meta(device_class),
            "spec": {"selectors": [{"cel": {"expression": expensive}}]},
        },
    )
    by_class, own = long_name(f"by-class-{RUN}"), long_name(f"own-cel-{RUN}")
    api.create(
        taintselector.SELECTORS,
        selector_body(by_class, "NoSchedule", {"driver": DRIVER, "deviceClassName": device_class}),
    )
    api.create(
        taintselector.SELECTORS,
        selector_body(
            own, "NoSchedule", {"driver": DRIVER, "selectors": [{"cel": {"expression": expensive}}]}
        ),
    )
    # The selector's own limits: 32 expressions of 10 KiB, none of which compiles.
    oversized = long_name(f"oversized-{RUN}")
    bad = [f"device.nope{i} == 1" for i in range(32)]
    api.create(
        taintselector.SELECTORS,
        selector_body(
            oversized,
            "NoSchedule",
            {"driver": DRIVER, "selectors": [{"cel": {"expression": e.ljust(10240)}} for e in bad]},
        ),
    )
    started = time.monotonic()
    for name in (by_class, own):
        found = taintselector.wait_condition(api, name, "Invalid", "True", "CELRuntimeError", timeout=120)
        assert "actual cost limit exceeded" in found["message"], found["message"]
        assert len(found["message"]) < CONDITION_MESSAGE_MAX
    fleet.timings["expensive_cel_invalid_seconds"] = round(time.monotonic() - started, 1)
    found = taintselector.wait_condition(api, oversized, "Invalid", "True", "InvalidCEL", timeout=60)
    assert "undefined field 'nope0'" in found["message"], found
    assert "more are invalid too" in found["message"], found
    assert len(found["message"]) < CONDITION_MESSAGE_MAX


def test_1000_device_taint_rules_at_once(
    fleet: Fleet, cluster: harness.Cluster, api: Kube, big_pool: BigPool
) -> None:
    names = [long_name(f"rule-{RUN}-{i:04d}") for i in range(RULE_COUNT)]
    bodies = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": meta(name),
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": BIG_POOL, "device": device_name(i * 7)},
                "taint": {"key": taintselector.KEY, "value": "Broken", "effect": "NoExecute"},
            },
        }
        for i, name in enumerate(names)
    ]
    created = burst(cluster.kubeconfig, RULES, bodies)
    started = time.monotonic()

    def all_answered() -> int | None:
        answered = 0
        for rule in api.list(RULES, labelSelector=SELECTOR):
            conditions = (rule.get("status") or {}).get("conditions") or []
            answered += any(
                (c["type"], c["status"], c["reason"]) == ("EvictionInProgress", "False", "NotStarted")
                for c in conditions
            )
        return answered if answered >= RULE_COUNT else None

    wait_for(all_answered, 300, f"all {RULE_COUNT} rules to get their condition", interval=2)
    fleet.timings["rules_create_seconds"] = round(created, 1)
    fleet.timings["rules_answered_seconds"] = round(time.monotonic() - started, 1)
    api.delete(RULES, labelSelector=SELECTOR)


def test_a_pod_with_256_claims(fleet: Fleet, api: Kube, namespace: str) -> None:
    template = long_name(f"many-{RUN}")
    api.create(templates_path(namespace), template_body(template))
    entries = [
        template_entry(f"claim-{i:03d}-" + "c" * (LABEL_MAX - 10), template) for i in range(POD_CLAIMS)
    ]
    pod = long_name(f"many-claims-{RUN}")
    api.create(pods_path(namespace), pod_body(pod, entries))
    started = time.monotonic()

    def all_recorded() -> list[dict[str, Any]] | None:
        statuses = (api.get(pods_path(namespace, pod)).get("status") or {}).get("resourceClaimStatuses") or []
        return statuses if len(statuses) == POD_CLAIMS else None

    statuses = wait_for(all_recorded, 120, f"the pod's status to name its {POD_CLAIMS} claims", interval=1)
    assert statuses is not None
    fleet.timings["pod_claims_seconds"] = round(time.monotonic() - started, 1)
    claims = {c["metadata"]["name"] for c in api.list(claims_path(namespace))}
    assert {s["resourceClaimName"] for s in statuses} == claims
    assert len(claims) == POD_CLAIMS


def test_parameters_nested_as_deep_as_the_api_allows(fleet: Fleet, api: Kube, namespace: str) -> None:
    """Opaque parameters are any JSON object of up to 10 KiB: 5 000 levels of nesting, where
    Python's JSON stops at 1 000. Every operator lists and watches such a claim (and resourceclaim
    the template it copies them from, writing them back in the claim it creates); the pod gets its
    claim, and no operator's watch fails on the way."""
    wirejson.read_what_the_server_reads()
    parameters = '{"levels":' + "[" * DEEP_PARAMETERS + "]" * DEEP_PARAMETERS + "}"
    template = template_body(f"deep-{RUN}")
    template["spec"]["spec"]["devices"]["config"] = [
        {"opaque": {"driver": DRIVER, "parameters": "PARAMETERS"}}
    ]
    # Written as text: the test's own encoder need not go that deep.
    api.create(templates_path(namespace), json.dumps(template).replace('"PARAMETERS"', parameters))
    pod = f"deep-{RUN}"
    api.create(pods_path(namespace), pod_body(pod, [template_entry("deep", template["metadata"]["name"])]))

    def recorded() -> list[dict[str, Any]] | None:
        return (api.get(pods_path(namespace, pod)).get("status") or {}).get("resourceClaimStatuses")

    statuses = wait_for(recorded, 60, "the pod's status to name its claim", interval=1)
    assert statuses is not None
    claim = api.get(claims_path(namespace, statuses[0]["resourceClaimName"]))
    assert claim["spec"]["devices"]["config"][0]["opaque"]["parameters"] == wirejson.loads(parameters)
    for name, op in fleet.ops.items():
        log = op.log()
        assert "RecursionError" not in log, f"{name} failed to read the claim"
        assert "nested deeper than" not in log, f"{name} refused the claim"


def test_2000_failures_in_a_minute(fleet: Fleet, cluster: harness.Cluster, api: Kube, namespace: str) -> None:
    """2000 pods whose template is missing, created within a minute: resourceclaim retries each
    with back-off and reports it with one Event per pod, never a second one.

    The 2000 first failures come faster than the Events go out (20 requests a second, the
    Deployment's default as kube-controller-manager's), so the backlog of 1000 fills and drops
    the rest, as client-go's broadcaster does; a dropped pod is reported at its next retry, and
    retries run at 10 a second overall (the work queue's limit, as client-go's). The last pods
    are reported about 200 s after the storm, most of this file's time."""
    names = [f"missing-{i:04d}" for i in range(FAILING_PODS)]
    bodies = [pod_body(name, [template_entry("gpu", "absent")]) for name in names]
    seconds = burst(cluster.kubeconfig, pods_path(namespace), bodies)
    fleet.timings["failing_pods_create_seconds"] = round(seconds, 1)
    assert seconds < 60, f"creating {FAILING_PODS} pods took {seconds:.0f} s, not a minute"
    started = time.monotonic()

    def reported() -> dict[str, list[dict[str, Any]]] | None:
        by_pod: dict[str, list[dict[str, Any]]] = {}
        for event in api.list(f"/api/v1/namespaces/{namespace}/events"):
            if event.get("reason") == FAILED_CREATION:
                by_pod.setdefault(event["involvedObject"]["name"], []).append(event)
        return by_pod if len(by_pod) == FAILING_PODS else None

    by_pod = wait_for(reported, 420, f"a {FAILED_CREATION} Event on each of {FAILING_PODS} pods", interval=3)
    assert by_pod is not None
    fleet.timings["failing_pods_all_reported_seconds"] = round(time.monotonic() - started, 1)
    duplicated = {pod: len(events) for pod, events in by_pod.items() if len(events) > 1}
    assert not duplicated, f"pods with more than one Event: {duplicated}"
    for events in by_pod.values():
        assert "absent" in events[0]["message"], events[0]
    repeated = sum(1 for events in by_pod.values() if events[0].get("count", 1) > 1)
    assert repeated, "retried failures update their Event's count"
    # One request instead of the namespace controller's 2000 deletions.
    api.delete(pods_path(namespace), gracePeriodSeconds="0")
