"""What the attacher knows about its ``DeviceAttachPolicy`` objects, between watch and reconciler.

One :class:`PolicyState` per policy object holds the parsed object (fed by the watch) and the
outcome of its last evaluation (fed by the policy sync): whether it is Ready, the settings and
the action instance of the last *accepted* generation. Records keep being driven with that
last accepted instance while a later generation is rejected (spec §21.4), so acceptance and
readiness are tracked apart.

:class:`PolicyBook` answers the reconciler's questions without I/O:

* which policy owns a driver (:meth:`PolicyBook.owner`): the oldest live one, as
  ``policy.duplicate_winner`` decides, so a rejected duplicate never steers selection;
* the selection rules per driver (:meth:`PolicyBook.rules`), and whether every policy a claim
  depends on has been evaluated at its current generation (:meth:`PolicyBook.settled`), so no
  claim is decided on a policy the process has not looked at yet (after a restart, for example);
* which policy instance drives an existing record (:meth:`PolicyBook.for_record`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .actions.base import supports_probe
from .models import DeviceAttachment, DeviceAttachPolicy
from .policy import PolicySettings
from .selection import SelectionRules


@dataclass
class PolicyState:
    name: str
    uid: str = ""
    generation: int = 0
    driver: str = ""
    creation: str = ""
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    resource_version: str = ""
    policy: DeviceAttachPolicy | None = None
    parse_error: str = ""
    status: Mapping[str, Any] = field(default_factory=dict)
    # -- evaluation (policy sync) --
    evaluated_generation: int | None = None
    ready: bool = False
    not_ready_message: str = ""
    accepted_generation: int | None = None
    settings: PolicySettings | None = None
    action: object | None = None
    action_kind: str = ""
    action_description: str = ""
    authorized_generation: int | None = None
    authorized_at: float = 0.0
    authorized: bool | None = None
    authorized_detail: str = ""
    secrets_read_at: float = 0.0
    secrets_digest: str = ""

    @property
    def evaluated(self) -> bool:
        return self.evaluated_generation == self.generation

    @property
    def probe_supported(self) -> bool:
        return self.action is not None and supports_probe(self.action)

    def seniority(self) -> tuple[str, str]:
        return (self.creation, self.name)


def parse_policy(body: Mapping[str, Any]) -> tuple[DeviceAttachPolicy | None, str]:
    try:
        return DeviceAttachPolicy.model_validate(body), ""
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors(include_url=False)
        )
        return None, f"the policy cannot be read: {problems}"


class PolicyBook:
    def __init__(self) -> None:
        self._states: dict[str, PolicyState] = {}

    def get(self, name: str) -> PolicyState | None:
        return self._states.get(name)

    def all(self) -> list[PolicyState]:
        return list(self._states.values())

    def observe(self, body: Mapping[str, Any]) -> PolicyState:
        """Update (or create) the state of a policy from its watched body; evaluation is kept."""
        meta = body.get("metadata") or {}
        name = str(meta.get("name", ""))
        state = self._states.get(name)
        if state is None or state.uid != meta.get("uid", ""):
            state = self._states[name] = PolicyState(name=name)
        policy, problem = parse_policy(body)
        spec = body.get("spec") or {}
        state.uid = str(meta.get("uid", ""))
        state.generation = int(meta.get("generation") or 0)
        state.driver = str(spec.get("driver", "")) if isinstance(spec, Mapping) else ""
        state.creation = str(meta.get("creationTimestamp", ""))
        state.deleting = meta.get("deletionTimestamp") is not None
        state.finalizers = tuple(meta.get("finalizers") or ())
        state.resource_version = str(meta.get("resourceVersion", ""))
        state.policy = policy
        state.parse_error = problem
        state.status = dict(body.get("status") or {})
        return state

    def forget(self, name: str) -> PolicyState | None:
        return self._states.pop(name, None)

    def parsed(self) -> list[DeviceAttachPolicy]:
        return [s.policy for s in self._states.values() if s.policy is not None]

    def same_driver(self, driver: str) -> list[PolicyState]:
        return [s for s in self._states.values() if s.driver == driver]

    def owner(self, driver: str) -> PolicyState | None:
        """The policy that configures ``driver``: the oldest live one, else the oldest deleting one."""
        candidates = self.same_driver(driver)
        live = [s for s in candidates if not s.deleting]
        pool = live or candidates
        return min(pool, key=PolicyState.seniority) if pool else None

    def drivers(self) -> set[str]:
        return {s.driver for s in self._states.values() if s.driver}

    def rules(self) -> dict[str, SelectionRules]:
        """Selection rules per configured driver (spec §5), from each driver's owning policy."""
        rules: dict[str, SelectionRules] = {}
        for driver in self.drivers():
            owner = self.owner(driver)
            if owner is None:
                continue
            if owner.policy is not None:
                rules[driver] = SelectionRules.of_policy(
                    owner.policy.spec, owner.ready, owner.not_ready_message
                )
            else:
                rules[driver] = SelectionRules(
                    driver=driver, ready=False, not_ready_message=owner.not_ready_message
                )
        return rules

    def settled(self, drivers: Iterable[str]) -> bool:
        """Whether every policy of these drivers has been evaluated at its current generation."""
        wanted = set(drivers)
        return all(s.evaluated for s in self._states.values() if s.driver in wanted)

    def for_record(self, record: DeviceAttachment) -> PolicyState | None:
        """The policy whose last accepted action drives ``record``: its own policy, else the
        driver's owner (a policy deleted by force, bypassing the finalizer)."""
        own = self._states.get(record.spec.policy.name)
        if own is not None and own.action is not None and own.driver == record.spec.driver:
            return own
        owner = self.owner(record.spec.driver)
        if owner is not None and owner.action is not None:
            return owner
        return None
