"""``kubectl dra pools``: ask the poolstatus operator, through a ResourcePoolStatusRequest per
driver, how many devices each pool has, and print its answer.

The request is created on the project CRD ``dra-operators.io/v1alpha1`` when the cluster serves
it (the project's operator answers it on every cluster), else on the built-in
``resource.k8s.io/v1alpha3`` (alpha: served only where enabled, answered by this project's
operator or by kube-controller-manager's in-tree controller). ``--api`` forces one. The requests
are deleted after the answer, or after the time-out, and on Ctrl-C.

Beside the counts, which the operator answers, the plugin reads the taints of each pool's devices
itself from the slices and DeviceTaintRules (:mod:`.devicetaints`): which device is out of service
and why, and which only carries a signal. A user who may not list DeviceTaintRules still gets the
counts and the drivers' own taints.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from operators.core import PROJECT_GROUP
from operators.dra.api import GROUP, RESOURCE_SLICES
from operators.dra.pools import PoolId
from operators.dra.slices import ResourceSlice, SliceDevice

from .devicetaints import PlacedTaint, parse_rules, placed_taints
from .errors import Forbidden, PluginError
from .poolview import Answer
from .session import Session, poll

PLURAL = "resourcepoolstatusrequests"
SURFACES = {"crd": (PROJECT_GROUP, "v1alpha1"), "builtin": (GROUP, "v1alpha3")}
SILENCE = "no operator answered within {timeout}: is the poolstatus operator running?"


@dataclass(frozen=True)
class PoolsQuery:
    drivers: tuple[str, ...]
    pool: str | None
    limit: int | None
    api: str
    timeout: float


async def surface(session: Session, choice: str) -> tuple[str, str]:
    """(apiVersion, collection path) of the request API to use."""
    order = ["crd", "builtin"] if choice == "auto" else [choice]
    for name in order:
        group, version = SURFACES[name]
        found = await session.first_served(group, PLURAL, [version])
        if found is not None:
            return found.api_version, found.path()
    if choice == "auto":
        raise PluginError(
            "this cluster serves no ResourcePoolStatusRequest API: install "
            "crds/resourcepoolstatusrequests.dra-operators.io.yaml, or enable resource.k8s.io/v1alpha3 "
            "(feature gate DRAResourcePoolStatus)"
        )
    group, version = SURFACES[choice]
    raise PluginError(f"this cluster does not serve {PLURAL} in {group}/{version} (--api {choice})")


@dataclass(frozen=True)
class Pools:
    """What ``kubectl dra pools`` shows: the operator's answers, and the taints of the devices."""

    api_version: str
    answers: list[Answer]
    taints: dict[PoolId, list[PlacedTaint]]
    rules_unread: str = ""
    """Why the DeviceTaintRules could not be read (their taints are then missing); empty when they were."""


def published_drivers(slices: list[dict[str, Any]], pool: str | None) -> tuple[str, ...]:
    """The drivers with ResourceSlices (of ``pool``, when given): asking the others is pointless."""
    return tuple(
        sorted(
            {
                s["spec"]["driver"]
                for s in slices
                if s.get("spec", {}).get("driver") and (pool is None or s["spec"]["pool"]["name"] == pool)
            }
        )
    )


def request_body(api_version: str, driver: str, pool: str | None, limit: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver}
    if pool:
        spec["poolName"] = pool
    if limit:
        spec["limit"] = limit
    return {
        "apiVersion": api_version,
        "kind": "ResourcePoolStatusRequest",
        "metadata": {"generateName": "kubectl-dra-pools-"},
        "spec": spec,
    }


async def _ask(session: Session, api_version: str, collection: str, driver: str, query: PoolsQuery) -> Answer:
    body = request_body(api_version, driver, query.pool, query.limit)
    async with session.temporary("a pool status request", collection, body) as created:
        path = f"{collection}/{created['metadata']['name']}"
        silence = SILENCE.format(timeout=f"{query.timeout:g}s")
        answered = await poll(
            lambda: session.get("reading the pool status request", path),
            lambda obj: bool(obj.get("status")),
            query.timeout,
            silence,
        )
    answer = Answer(driver, query.pool, answered["status"], query.limit)
    if answer.condition.get("type") == "Failed":
        raise PluginError(
            f"the pool status request for driver {driver} failed: {answer.condition.get('message')}"
        )
    return answer


async def _taints(
    session: Session, slices: list[dict[str, Any]], pools: set[PoolId]
) -> tuple[dict[PoolId, list[PlacedTaint]], str]:
    try:
        rules, unread = parse_rules(await session.device_taint_rules()), ""
    except Forbidden as err:
        rules, unread = [], str(err)
    parsed = [
        ResourceSlice[SliceDevice].model_validate(s)
        for s in slices
        if ((s.get("spec") or {}).get("driver"), ((s.get("spec") or {}).get("pool") or {}).get("name"))
        in pools
    ]
    by_pool: dict[PoolId, list[PlacedTaint]] = {}
    for device, taints in placed_taints(parsed, rules).items():
        by_pool.setdefault((device.driver, device.pool), []).extend(taints)
    return by_pool, unread


async def ask(session: Session, query: PoolsQuery) -> Pools:
    api_version, collection = await surface(session, query.api)
    slices = await session.items("listing ResourceSlices", RESOURCE_SLICES.path())
    drivers = query.drivers or published_drivers(slices, query.pool)
    # Every request runs to its answer or its time-out (and is deleted) before the first error is raised.
    outcomes = await asyncio.gather(
        *(_ask(session, api_version, collection, d, query) for d in drivers), return_exceptions=True
    )
    answers: list[Answer] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
        answers.append(outcome)
    shown = {
        (str(p.get("driver")), str(p.get("poolName"))) for a in answers for p in a.status.get("pools") or []
    }
    taints, unread = await _taints(session, slices, shown) if shown else ({}, "")
    return Pools(api_version, answers, taints, unread)
