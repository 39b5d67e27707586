"""What ``kubectl dra pools`` prints: the answers of ResourcePoolStatusRequests, as one document
(``-o json|yaml``) or as a table per pool. Pure functions over the API's own JSON.

The document keeps every pool exactly as the operator wrote it in the request's status, so that
scripts read the API's field names; only the requests around them are summarised. The taints of the
pools' devices, which the plugin reads itself, follow as ``deviceTaints`` when there are any.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from operators.dra.pools import PoolId
from operators.dra.quantity import Quantity, QuantityError, QuantityRangeError

from .devicetaints import PlacedTaint
from .tables import ALLOCATED, FREE, UNAVAILABLE, bar, percent, table

LEGEND = f"Bars: {ALLOCATED} allocated, {UNAVAILABLE} unavailable (tainted), {FREE} available."
PARTITION_NOTE = "Partition types are alternative ways to use the same hardware: do not add them up."
TAINT_NOTE = (
    "Taints: NoSchedule keeps new claims off a device, NoExecute also evicts the pods using it; "
    "a None taint is a signal, informational: it blocks nothing."
)


@dataclass(frozen=True)
class Answer:
    """One answered request: what was asked and the status the operator wrote."""

    driver: str
    pool_name: str | None
    status: Mapping[str, Any]
    limit: int | None = None

    @property
    def condition(self) -> Mapping[str, Any]:
        conditions = self.status.get("conditions") or [{}]
        first: Mapping[str, Any] = conditions[0]
        return first


def _taint_entry(placed: PlacedTaint) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "driver": placed.device.driver,
        "poolName": placed.device.pool,
        "device": placed.device.device,
        "key": placed.taint.key,
        "value": placed.taint.value,
        "effect": placed.taint.effect,
        "source": placed.source,
    }
    if placed.policy:
        entry["deviceHealthPolicy"] = placed.policy
    return entry


def document(
    api_version: str, answers: Sequence[Answer], taints: Mapping[PoolId, Sequence[PlacedTaint]] | None = None
) -> dict[str, Any]:
    placed = [_taint_entry(t) for pool in sorted(taints or {}) for t in (taints or {})[pool]]
    return {
        "apiVersion": api_version,
        "requests": [
            {
                "driver": a.driver,
                **({"poolName": a.pool_name} if a.pool_name else {}),
                **({"limit": a.limit} if a.limit else {}),
                "poolCount": a.status.get("poolCount", 0),
                "condition": {k: a.condition.get(k) for k in ("type", "status", "reason", "message")},
            }
            for a in answers
        ],
        "pools": [dict(pool) for a in answers for pool in a.status.get("pools") or []],
        **({"deviceTaints": placed} if placed else {}),
    }


def _title(pool: Mapping[str, Any]) -> str:
    facts = []
    if pool.get("nodeName"):
        facts.append(f"node {pool['nodeName']}")
    facts.append(f"generation {pool.get('generation', 0)}")
    slices = pool.get("resourceSliceCount")
    if slices is not None:
        facts.append(f"{slices} slice" + ("" if slices == 1 else "s"))
    return f"Pool {pool['driver']}/{pool['poolName']} ({', '.join(facts)})"


def _counts(pool: Mapping[str, Any]) -> list[str]:
    total = pool["totalDevices"]
    allocated = pool.get("allocatedDevices", 0)
    unavailable = pool.get("unavailableDevices", 0)
    drawn = bar([(allocated, ALLOCATED), (unavailable, UNAVAILABLE)], total)
    return table(
        ("TOTAL", "ALLOCATED", "AVAILABLE", "UNAVAILABLE", "UTILISATION"),
        [
            (
                total,
                allocated,
                pool.get("availableDevices", 0),
                unavailable,
                f"{drawn}  {percent(allocated, total)}",
            )
        ],
        indent="  ",
    )


def _partitions(summary: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [(p["type"], p["attribute"], p["total"], p["allocatable"]) for p in summary]
    return [
        *table(("PARTITION TYPE", "ATTRIBUTE", "TOTAL", "ALLOCATABLE"), rows, indent="  "),
        f"  {PARTITION_NOTE}",
    ]


def _fraction(text: str) -> Fraction | None:
    try:
        return Quantity.parse(text).as_fraction()
    except (QuantityError, QuantityRangeError):
        # A value too large to write out exactly (``10e2147483646``) shows no utilisation bar.
        return None


def _shareable(summary: Mapping[str, Any]) -> list[str]:
    lines = [
        f"  Shareable devices: {summary.get('fullyAvailableDevices', 0)} fully available, "
        f"{summary.get('partiallyAvailableDevices', 0)} partially available."
    ]
    rows = []
    for capacity in summary.get("capacity") or []:
        total, consumed = _fraction(capacity["total"]), _fraction(capacity["consumed"])
        usage = "-"
        if total is not None and consumed is not None and total > 0:
            usage = f"{bar([(min(consumed, total), ALLOCATED)], total)}  {percent(consumed, total)}"
        rows.append((capacity["name"], capacity["total"], capacity["consumed"], capacity["available"], usage))
    if rows:
        lines += table(("CAPACITY", "TOTAL", "CONSUMED", "AVAILABLE", "UTILISATION"), rows, indent="  ")
    return lines


def _effect(placed: PlacedTaint) -> str:
    return placed.taint.effect if placed.blocks else f"{placed.taint.effect or '-'} (signal)"


def _taints(taints: Sequence[PlacedTaint]) -> list[str]:
    rows = [(t.device.device, t.pair, _effect(t), t.origin) for t in taints]
    return table(("DEVICE", "TAINT", "EFFECT", "FROM"), rows, indent="  ")


def render_pool(pool: Mapping[str, Any], taints: Sequence[PlacedTaint] = ()) -> list[str]:
    lines = [_title(pool)]
    if pool.get("totalDevices") is not None:
        lines += _counts(pool)
    if pool.get("validationError"):
        lines.append(f"  {pool['validationError']}")
    if pool.get("partitionSummary"):
        lines += _partitions(pool["partitionSummary"])
    if pool.get("shareableSummary"):
        lines += _shareable(pool["shareableSummary"])
    if taints:
        lines += _taints(taints)
    return lines


def _request_notes(answer: Answer) -> list[str]:
    shown = len(answer.status.get("pools") or [])
    count = answer.status.get("poolCount", 0)
    scope = f"driver {answer.driver}" + (f", pool {answer.pool_name}" if answer.pool_name else "")
    if count == 0:
        return [f"No pools of {scope}."]
    if shown < count:
        return [
            f"Showing {shown} of {count} pools of {scope}: raise --limit (at most 1000) or pick one --pool."
        ]
    return []


def render(
    answers: Sequence[Answer],
    taints: Mapping[PoolId, Sequence[PlacedTaint]] | None = None,
    rules_unread: str = "",
) -> str:
    taints = taints or {}
    blocks: list[list[str]] = []
    for answer in answers:
        blocks += [
            render_pool(pool, taints.get((str(pool.get("driver")), str(pool.get("poolName"))), ()))
            for pool in answer.status.get("pools") or []
        ]
    notes = [note for answer in answers for note in _request_notes(answer)]
    if any(line.startswith("  TOTAL") for block in blocks for line in block):
        notes.append(LEGEND)
    if any(line.startswith("  DEVICE  ") for block in blocks for line in block):
        notes.append(TAINT_NOTE)
    if rules_unread:
        notes.append(f"DeviceTaintRules are not shown: {rules_unread}.")
    if notes:
        blocks.append(notes)
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
