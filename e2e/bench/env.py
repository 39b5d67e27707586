"""Clusters, operators and measurements for the benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import statistics
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from devcluster import launcher
from devcluster.cluster import ensure_devcluster
from devcluster.kube import Kube
from e2e import harness
from e2e.backends import remove_devcluster
from operators.core.client import KubeClient

T = TypeVar("T")

UNTHROTTLED_KCM = ("--kube-api-qps=10000", "--kube-api-burst=10000")
DEFAULT_KCM = ("--kube-api-qps=20", "--kube-api-burst=30")


# On a shared 2-core machine one unthrottled run of either side varies by 10-20 % (and a whole
# bench run by up to 30 % from the next), so that tier alternates upstream and ours and reports
# the medians; five rounds, because with three one slow pair moved the ratio by 0.05-0.1. A
# throttled run is paced by its token bucket and varies by well under 1 %.
UNTHROTTLED_ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


@dataclass
class Tier:
    name: str
    kcm_args: tuple[str, ...]
    operator_args: tuple[str, ...]
    rounds: int = 1


TIERS = {
    "default-limits": Tier("default-limits", DEFAULT_KCM, ("--kube-api-qps=20", "--kube-api-burst=30")),
    "unthrottled": Tier("unthrottled", UNTHROTTLED_KCM, ("--kube-api-qps=0",), UNTHROTTLED_ROUNDS),
}


@dataclass
class Result:
    benchmark: str
    tier: str
    upstream: dict[str, float] = field(default_factory=dict)
    ours: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def ratio(self, key: str) -> float | None:
        up, us = self.upstream.get(key), self.ours.get(key)
        if not up or us is None:
            return None
        return us / up


@contextlib.contextmanager
def devcluster(
    upstream: bool, kcm_args: Sequence[str] = (), binding_timeout: str | None = None
) -> Iterator[harness.Cluster]:
    directory = Path(tempfile.mkdtemp(prefix="dra-bench-"))
    started = ensure_devcluster(
        directory,
        upstream_dra=upstream,
        binding_timeout=binding_timeout,
        extra_args={"kube-controller-manager": list(kcm_args)},
        die_with_parent=True,
        build_log=lambda _: None,
    )
    cluster = harness.Cluster.of_devcluster(started)
    try:
        yield cluster
    finally:
        remove_devcluster(directory, cluster.workdir)


def restricted_kubeconfig(cluster: harness.Cluster, api: Kube, operator: str) -> str:
    objects = harness.rbac_objects(cluster)
    harness.apply_rbac(cluster, objects)
    namespace, account = harness.service_account_of(objects, operator)
    return harness.token_kubeconfig(cluster, api, namespace, account)


def status_kib(pid: int, field_name: str) -> int:
    """A KiB field of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``: the kernel's own peak); 0 once
    the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakRss:
    """Samples VmHWM (the kernel's own peak) of a process until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kib = 0

    def sample(self) -> int:
        self.peak_kib = max(self.peak_kib, status_kib(self.pid, "VmHWM"))
        return self.peak_kib

    @property
    def mib(self) -> float:
        return round(self.peak_kib / 1024, 1)


class CpuUse:
    """CPU seconds (user + system) each process of a run spends while a workload runs: the
    control plane's components, our operator, and this process (the workload generator and the
    bench's watches). The unthrottled bursts saturate both cores, so a run's length follows the
    sum, and the split says which process made the difference between upstream and ours."""

    def __init__(self, cluster: harness.Cluster, operator_pid: int | None = None) -> None:
        components = cluster.state.components if cluster.state is not None else {}
        self._pids = {name: component.pid for name, component in components.items()}
        if operator_pid is not None:
            self._pids["operator"] = operator_pid
        self._start = self._now()

    def _now(self) -> dict[str, float]:
        used = {name: launcher.cpu_seconds(pid) for name, pid in self._pids.items()}
        own = resource.getrusage(resource.RUSAGE_SELF)
        used["bench"] = own.ru_utime + own.ru_stime
        return used

    def used(self) -> dict[str, float]:
        now = self._now()
        spent = {name: now[name] - self._start[name] for name in now}
        result = {f"cpu_{name}": round(seconds, 2) for name, seconds in spent.items()}
        # The controllers' share: kube-controller-manager with its in-tree controller upstream;
        # kube-controller-manager without it plus our operator in our run.
        controllers = spent.get("kube-controller-manager", 0.0) + spent.get("operator", 0.0)
        result["cpu_controllers"] = round(controllers, 2)
        result["cpu_total"] = round(sum(spent.values()), 2)
        return result


@contextlib.contextmanager
def our_operator(
    cluster: harness.Cluster, api: Kube, name: str, args: Sequence[str]
) -> Iterator[harness.RunningOperator]:
    kubeconfig = restricted_kubeconfig(cluster, api, name)
    # A large initial listing (thousands of objects) takes a while before the operator is ready.
    with harness.operator_running(name, kubeconfig, cluster.workdir, "subprocess", tuple(args), 900) as op:
        yield op


def run_async(coro_factory: Callable[[KubeClient], Awaitable[T]], kubeconfig: str) -> T:
    """Run a burst of requests with an unthrottled client of its own (the workload generator)."""

    async def main() -> T:
        client = await KubeClient.from_kubeconfig(kubeconfig, qps=0, burst=1)
        try:
            return await coro_factory(client)
        finally:
            await client.close()

    return asyncio.run(main())


async def bounded_gather(items: Sequence[Callable[[], Awaitable[Any]]], concurrency: int = 50) -> list[Any]:
    semaphore = asyncio.Semaphore(concurrency)

    async def one(make: Callable[[], Awaitable[Any]]) -> Any:
        async with semaphore:
            return await make()

    return await asyncio.gather(*(one(m) for m in items))


def interleave(many: Sequence[T], few: Sequence[T]) -> list[T]:
    """``few`` spread evenly among ``many``, as pods of two kinds arrive in a real cluster."""
    step = max(1, len(many) // max(1, len(few)))
    left = list(few)
    mixed: list[T] = []
    for i, item in enumerate(many):
        mixed.append(item)
        if i % step == step - 1 and left:
            mixed.append(left.pop())
    return mixed + left


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure_ours(
    operator: str,
    tier: Tier,
    setup: Callable[[Kube], None],
    workload: Callable[[Kube, PeakRss | None], float],
) -> dict[str, float]:
    """The workload's seconds with our operator (in-tree controllers off) and its peak RSS.

    The operator starts before ``setup``, as kube-controller-manager runs through it in the
    upstream run: started after it, the operator would still be taking in the setup's objects
    (kopf's own listing, the re-list for vanished objects) while the workload is timed."""
    with devcluster(upstream=False) as cluster:
        api = Kube(cluster.kubeconfig)
        try:
            with our_operator(cluster, api, operator, tier.operator_args) as op:
                setup(api)
                assert op.process is not None
                rss = PeakRss(op.process.pid)
                cpu = CpuUse(cluster, op.process.pid)
                seconds = workload(api, rss)
                return {"seconds": round(seconds, 2), "peak_rss_mib": rss.mib, **cpu.used()}
        finally:
            api.close()


def compare_tiers(
    operator: str,
    setup: Callable[[Kube], None],
    workload: Callable[[Kube, PeakRss | None], float],
    note: str,
) -> list[Result]:
    """For each tier: the workload's seconds and CPU use with the upstream controller, then with
    ours (and our peak RSS), each on a fresh devcluster prepared by ``setup``; ``tier.rounds``
    alternating pairs, of which the medians (and the highest peak RSS) are reported."""
    results = []
    for tier in TIERS.values():
        result = Result(operator, tier.name)
        upstream: list[dict[str, float]] = []
        ours: list[dict[str, float]] = []
        for _ in range(tier.rounds):
            with devcluster(upstream=True, kcm_args=tier.kcm_args) as cluster:
                api = Kube(cluster.kubeconfig)
                try:
                    setup(api)
                    cpu = CpuUse(cluster)
                    seconds = workload(api, None)
                    upstream.append({"seconds": round(seconds, 2), **cpu.used()})
                finally:
                    api.close()
            ours.append(measure_ours(operator, tier, setup, workload))
        result.upstream.update(_medians(upstream))
        result.ours.update(_medians(ours))
        result.ours["peak_rss_mib"] = max(run["peak_rss_mib"] for run in ours)
        result.notes.append(note)
        if tier.rounds > 1:
            result.notes.append(
                f"medians of {tier.rounds} alternating rounds; "
                f"upstream {[run['seconds'] for run in upstream]}, ours {[run['seconds'] for run in ours]}"
            )
        results.append(result)
    return results


def _medians(runs: Sequence[dict[str, float]]) -> dict[str, float]:
    return {key: round(median([run[key] for run in runs]), 2) for key in runs[0]}
