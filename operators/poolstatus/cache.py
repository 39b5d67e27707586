"""The operator's in-memory view of the cluster: projections of slices, claims, rules, requests.

Watch handlers feed it (synchronously, on the event loop); an evaluation reads one driver's
share of it without awaiting anything in between, so no update can interleave with a
computation (spec section 6.4). Objects are kept as the typed projections of ``models``
(spec section 6.2), never as full bodies, and are indexed so that one evaluation touches
only the requested driver's slices and claims:

* slices by driver, then by name;
* allocated claims by key, plus the set of claim keys whose results name each driver;
* taint rules by name (there are few);
* requests by (API group, name): a request named ``x`` on each surface is two requests.

Parsing is the caller's job (it logs bad input with the object's reference); the methods
here take models that already validated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .models import DeviceTaintRule, ResourceClaim, ResourcePoolStatusRequest, ResourceSlice
from .surfaces import Surface

RequestKey = tuple[str, str]
"""(API group of the surface, request name)."""


@dataclass(frozen=True)
class RequestEntry:
    surface: Surface
    request: ResourcePoolStatusRequest

    @property
    def key(self) -> RequestKey:
        return (self.surface.group, self.request.metadata.name)

    @property
    def uid(self) -> str:
        return self.request.metadata.uid

    @property
    def pending(self) -> bool:
        return self.request.status is None


@dataclass(frozen=True)
class Snapshot:
    """What one evaluation reads: plain lists, detached from the live dictionaries."""

    slices: list[ResourceSlice]
    claims: list[ResourceClaim]
    rules: list[DeviceTaintRule]


def claim_key(namespace: str | None, name: str) -> str:
    return f"{namespace or ''}/{name}"


@dataclass
class Caches:
    slices_by_driver: dict[str, dict[str, ResourceSlice]] = field(default_factory=dict)
    _slice_driver: dict[str, str] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    _claim_drivers: dict[str, frozenset[str]] = field(default_factory=dict)
    claims_by_driver: dict[str, set[str]] = field(default_factory=dict)
    rules: dict[str, DeviceTaintRule] = field(default_factory=dict)
    requests: dict[RequestKey, RequestEntry] = field(default_factory=dict)

    # -- slices ---------------------------------------------------------------------------

    def put_slice(self, resource_slice: ResourceSlice) -> set[str]:
        """Store a slice; returns the drivers whose pools changed (two if the driver did)."""
        name = resource_slice.metadata.name
        touched = self.remove_slice(name)
        driver = resource_slice.spec.driver
        self.slices_by_driver.setdefault(driver, {})[name] = resource_slice
        self._slice_driver[name] = driver
        return touched | {driver}

    def remove_slice(self, name: str) -> set[str]:
        driver = self._slice_driver.pop(name, None)
        if driver is None:
            return set()
        by_name = self.slices_by_driver.get(driver, {})
        by_name.pop(name, None)
        if not by_name:
            self.slices_by_driver.pop(driver, None)
        return {driver}

    # -- claims ---------------------------------------------------------------------------

    def put_claim(self, claim: ResourceClaim) -> None:
        """Keep only allocated claims: the others cannot make a device allocated."""
        key = claim_key(claim.metadata.namespace, claim.metadata.name)
        self.remove_claim(key)
        allocation = claim.status.allocation
        if allocation is None or not allocation.devices.results:
            return
        drivers = frozenset(r.driver for r in allocation.devices.results)
        self.claims[key] = claim
        self._claim_drivers[key] = drivers
        for driver in drivers:
            self.claims_by_driver.setdefault(driver, set()).add(key)

    def remove_claim(self, key: str) -> None:
        self.claims.pop(key, None)
        for driver in self._claim_drivers.pop(key, frozenset()):
            keys = self.claims_by_driver.get(driver)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.claims_by_driver[driver]

    # -- taint rules ----------------------------------------------------------------------

    def put_rule(self, rule: DeviceTaintRule) -> None:
        self.rules[rule.metadata.name] = rule

    def remove_rule(self, name: str) -> None:
        self.rules.pop(name, None)

    # -- requests -------------------------------------------------------------------------

    def put_request(self, surface: Surface, request: ResourcePoolStatusRequest) -> RequestEntry:
        entry = RequestEntry(surface, request)
        self.requests[entry.key] = entry
        return entry

    def remove_request(self, key: RequestKey) -> RequestEntry | None:
        return self.requests.pop(key, None)

    def pending_of_driver(self, driver: str) -> Iterator[RequestEntry]:
        return (e for e in self.requests.values() if e.pending and e.request.spec.driver == driver)

    def pending_count(self, group: str) -> int:
        return sum(1 for e in self.requests.values() if e.pending and e.surface.group == group)

    # -- reading --------------------------------------------------------------------------

    def snapshot(self, driver: str, with_rules: bool) -> Snapshot:
        """The inputs of one evaluation for ``driver``; copies, so later updates cannot leak in."""
        slices = list(self.slices_by_driver.get(driver, {}).values())
        claims = [self.claims[key] for key in self.claims_by_driver.get(driver, ())]
        rules = list(self.rules.values()) if with_rules else []
        return Snapshot(slices, claims, rules)
