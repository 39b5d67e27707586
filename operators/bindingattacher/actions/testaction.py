"""Built-in ``Test`` action (spec §10.7) for acceptance and chaos tests.

It simulates a backend with an in-memory inventory keyed by attachment key. Behaviour comes
from the policy's ``action.test`` and can be overridden per claim with
``test.dra-operators.io/*`` annotations (which reach the action through
``ClaimRef.annotations``).

The call is counted and the inventory listener notified *before* any delay, so that a test
that kills the operator mid-call still sees the call (scenario 6a expects two attach calls
after a restart). Attach is idempotent: a repeated attach of an attached key answers
``Succeeded`` without changing the state. Detach of an unknown key succeeds ("not attached").

The inventory is mirrored by the runtime into a ConfigMap when the policy names one: the
listener receives the ConfigMap ``data`` after every change, and :meth:`TestAction.load`
restores it after a restart.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from operators.core.conditions import format_time
from operators.dra.durations import parse_go_duration

from ..models import TestActionSpec
from .base import AttachRequest, AttachResult, BaseAction, Operation, Outcome

TEST_ANNOTATION_PREFIX = "test.dra-operators.io/"
ATTACH_OUTCOMES = ("Succeed", "Fail", "Transient", "InProgress", "Hang")
DETACH_OUTCOMES = ("Succeed", "Transient", "Fail")

InventoryListener = Callable[[dict[str, str]], None]


@dataclass(frozen=True)
class TestParameters:
    __test__ = False  # not a pytest test class, despite the name
    attach_outcome: str = "Succeed"
    attach_delay: float = 0.0
    fail_first: int = 0
    fail_allocations: int = 0
    detach_outcome: str = "Succeed"
    detach_delay: float = 0.0

    @classmethod
    def of_spec(cls, spec: TestActionSpec) -> TestParameters:
        params = cls(
            attach_outcome=spec.attach_outcome,
            attach_delay=parse_go_duration(spec.attach_delay).total_seconds(),
            fail_first=spec.fail_first,
            fail_allocations=spec.fail_allocations,
            detach_outcome=spec.detach_outcome,
            detach_delay=parse_go_duration(spec.detach_delay).total_seconds(),
        )
        params.check()
        return params

    def check(self) -> None:
        if self.attach_outcome not in ATTACH_OUTCOMES:
            raise ValueError(
                f"attachOutcome {self.attach_outcome!r} is not one of {', '.join(ATTACH_OUTCOMES)}"
            )
        if self.detach_outcome not in DETACH_OUTCOMES:
            raise ValueError(
                f"detachOutcome {self.detach_outcome!r} is not one of {', '.join(DETACH_OUTCOMES)}"
            )
        if min(self.fail_first, self.fail_allocations) < 0 or min(self.attach_delay, self.detach_delay) < 0:
            raise ValueError("counts and delays must not be negative")

    def overridden(self, annotations: Mapping[str, str]) -> TestParameters:
        """Apply per-claim annotations; unparsable values are ignored rather than failing calls."""
        changes: dict[str, Any] = {}
        for name, attr, convert in (
            ("attach-outcome", "attach_outcome", str),
            ("attach-delay", "attach_delay", _seconds),
            ("fail-first", "fail_first", int),
            ("fail-allocations", "fail_allocations", int),
            ("detach-outcome", "detach_outcome", str),
            ("detach-delay", "detach_delay", _seconds),
        ):
            raw = annotations.get(TEST_ANNOTATION_PREFIX + name)
            if raw is None:
                continue
            try:
                changes[attr] = convert(raw)
            except ValueError:
                continue
        candidate = replace(self, **changes)
        try:
            candidate.check()
        except ValueError:
            return self
        return candidate


def _seconds(text: str) -> float:
    return parse_go_duration(text).total_seconds()


@dataclass
class InventoryEntry:
    node: str | None
    device: str
    state: str = "detached"
    attach_calls: int = 0
    detach_calls: int = 0
    last_call: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "node": self.node,
                "device": self.device,
                "state": self.state,
                "attachCalls": self.attach_calls,
                "detachCalls": self.detach_calls,
                "lastCall": self.last_call,
            },
            separators=(",", ":"),
        )


@dataclass
class TestAction(BaseAction):
    params: TestParameters = TestParameters()
    listener: InventoryListener | None = None
    clock: Callable[[], float] = time.monotonic
    inventory: dict[str, InventoryEntry] = field(default_factory=dict)
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Calls per ``(operation, outcome)``: feeds ``test_action_calls_total``."""
    _first_call: dict[str, float] = field(default_factory=dict)
    _allocations: dict[str, list[str]] = field(default_factory=dict)

    probe_enabled = False
    __test__ = False  # not a pytest test class, despite the name

    def inventory_data(self) -> dict[str, str]:
        return {key: entry.to_json() for key, entry in sorted(self.inventory.items())}

    def load(self, data: Mapping[str, str]) -> None:
        for key, raw in data.items():
            try:
                doc = json.loads(raw)
                self.inventory[key] = InventoryEntry(
                    node=doc.get("node"),
                    device=doc.get("device", ""),
                    state=doc.get("state", "detached"),
                    attach_calls=int(doc.get("attachCalls", 0)),
                    detach_calls=int(doc.get("detachCalls", 0)),
                    last_call=doc.get("lastCall", ""),
                )
            except (ValueError, TypeError, AttributeError):
                continue

    def _touch(self, operation: Operation, request: AttachRequest) -> InventoryEntry:
        entry = self.inventory.get(request.attachment_key)
        if entry is None:
            node = request.node.name if request.node else None
            device = f"{request.device.driver}/{request.device.pool}/{request.device.name}"
            entry = self.inventory[request.attachment_key] = InventoryEntry(node=node, device=device)
        if operation is Operation.DETACH:
            entry.detach_calls += 1
        else:
            entry.attach_calls += 1
        entry.last_call = f"{operation.lower()} {format_time(datetime.now(UTC))}"
        self._notify()
        return entry

    def _notify(self) -> None:
        if self.listener is not None:
            self.listener(self.inventory_data())

    def _answer(self, operation: Operation, result: AttachResult) -> AttachResult:
        self.calls[(operation.lower(), result.outcome.value)] += 1
        return result

    def _failing_allocation(self, request: AttachRequest, params: TestParameters) -> bool:
        if params.fail_allocations <= 0:
            return False
        seen = self._allocations.setdefault(request.claim.uid, [])
        stamp = format_time(request.allocation_timestamp)
        if stamp not in seen:
            seen.append(stamp)
        return seen.index(stamp) < params.fail_allocations

    async def attach(self, request: AttachRequest) -> AttachResult:
        params = self.params.overridden(request.claim.annotations)
        entry = self._touch(Operation.ATTACH, request)
        key = request.attachment_key
        first = self._first_call.setdefault(key, self.clock())
        if entry.attach_calls <= params.fail_first:
            await asyncio.sleep(params.attach_delay)
            return self._answer(
                Operation.ATTACH, AttachResult(Outcome.TRANSIENT_ERROR, "test action: fail-first")
            )
        if self._failing_allocation(request, params):
            await asyncio.sleep(params.attach_delay)
            return self._answer(
                Operation.ATTACH,
                AttachResult(Outcome.PERMANENT_ERROR, "test action: failing this allocation"),
            )
        outcome = params.attach_outcome
        if outcome == "Hang":
            await asyncio.Event().wait()
        if outcome == "InProgress":
            left = params.attach_delay - (self.clock() - first)
            if left > 0:
                return self._answer(
                    Operation.ATTACH,
                    AttachResult(
                        Outcome.IN_PROGRESS, "test action: attaching", retry_after_seconds=min(left, 1.0)
                    ),
                )
            return self._answer(Operation.ATTACH, self._attached(entry))
        await asyncio.sleep(params.attach_delay)
        if outcome == "Fail":
            return self._answer(
                Operation.ATTACH, AttachResult(Outcome.PERMANENT_ERROR, "test action: attach failed")
            )
        if outcome == "Transient":
            return self._answer(
                Operation.ATTACH, AttachResult(Outcome.TRANSIENT_ERROR, "test action: transient")
            )
        return self._answer(Operation.ATTACH, self._attached(entry))

    def _attached(self, entry: InventoryEntry) -> AttachResult:
        if entry.state != "attached":
            entry.state = "attached"
            self._notify()
        return AttachResult(Outcome.SUCCEEDED, f"test action attached {entry.device}", {"action": "test"})

    async def detach(self, request: AttachRequest) -> AttachResult:
        params = self.params.overridden(request.claim.annotations)
        entry = self._touch(Operation.DETACH, request)
        await asyncio.sleep(params.detach_delay)
        if params.detach_outcome == "Fail":
            return self._answer(
                Operation.DETACH, AttachResult(Outcome.PERMANENT_ERROR, "test action: detach failed")
            )
        if params.detach_outcome == "Transient":
            return self._answer(
                Operation.DETACH, AttachResult(Outcome.TRANSIENT_ERROR, "test action: transient")
            )
        if entry.state != "detached":
            entry.state = "detached"
            self._notify()
        self._first_call.pop(request.attachment_key, None)
        return self._answer(Operation.DETACH, AttachResult(Outcome.SUCCEEDED))
