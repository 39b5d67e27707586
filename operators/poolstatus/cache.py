"""The operator's in-memory view of the cluster, indexed per pool, with each pool's answer kept.

Watch handlers feed it (synchronously, on the event loop); an evaluation reads one driver's
share of it without awaiting anything in between, so no update can interleave with a
computation (spec section 6.4). Objects are kept as small projections (spec section 6.2),
never as full bodies:

* slices as ``models.ResourceSlice``, grouped by (driver, pool);
* allocated claims as their held devices only (``counts.Held``), grouped by the pools they
  name;
* taint rules by name (there are few);
* requests by (API group, name): a request named ``x`` on each surface is two requests.

A removal given a UID removes only the object of that UID: a re-list after a watch gap hands
over the objects it finds before the deletions it inferred (as tombstones), so an object
deleted and created again under its name in the gap must not take its successor with it.

A pool's entry of the status depends only on its slices, its held devices, the taint rules
and the request's default partition attribute, so it is computed once and kept until one of
them changes: answering a request then costs a dictionary lookup per pool, however many
devices and claims there are. The result equals :func:`status.compute_pools` on the same
objects (``tests/test_poolstatus_cache.py`` checks it on every representative scenario).

Parsing is the caller's job (it logs bad input with the object's reference); the methods
here take models that already validated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from operators.core.keys import CLAIM, Key
from operators.dra.pools import PoolId

from .counts import Held, held_devices, rules_for_driver
from .models import DeviceTaintRule, RequestSpec, ResourceClaim, ResourcePoolStatusRequest, ResourceSlice
from .pools import build_pool
from .status import PoolResult, pool_result
from .surfaces import Surface

RequestKey = tuple[str, str]
"""(API group of the surface, request name)."""
ClaimKey = Key
"""``Key(CLAIM, namespace, name)``: its order (by namespace, then name) is also the order in which
claims' results are summed (decision D8)."""
_MemoKey = tuple[str | None, int]
"""(default partition attribute, taint-rule epoch or -1 without rules)."""
K = TypeVar("K", str, ClaimKey)
# A pool's answers are kept for this many (attribute, rules) variants; requests rarely differ.
_MEMO_VARIANTS = 4


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


@dataclass
class _PoolState:
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    held: dict[ClaimKey, tuple[Held, ...]] = field(default_factory=dict)
    # Only answers are kept, not the built pool: its per-device objects would double what
    # the garbage collector walks, to save about a millisecond when a claim changes.
    answers: dict[_MemoKey, PoolResult] = field(default_factory=dict)


@dataclass
class ClusterCache:
    claims: dict[ClaimKey, tuple[Held, ...]] = field(default_factory=dict)
    rules: dict[str, DeviceTaintRule] = field(default_factory=dict)
    requests: dict[RequestKey, RequestEntry] = field(default_factory=dict)
    _pools: dict[PoolId, _PoolState] = field(default_factory=dict)
    _pool_names: dict[str, set[str]] = field(default_factory=dict)
    """Driver -> names of its pools that have slices."""
    _slice_pool: dict[str, PoolId] = field(default_factory=dict)
    _slice_versions: dict[str, str] = field(default_factory=dict)
    _claim_versions: dict[ClaimKey, str] = field(default_factory=dict)
    _claim_uids: dict[ClaimKey, str] = field(default_factory=dict)
    """The UIDs of the claims in ``claims``, which keep held devices only."""
    _rules_epoch: int = 0

    # A re-delivered version (kopf lists everything again after the runtime's own listing)
    # is recognised by its resourceVersion and then costs no parsing.

    def slice_unchanged(self, name: str, resource_version: str) -> bool:
        return bool(resource_version) and self._slice_versions.get(name) == resource_version

    def claim_unchanged(self, key: ClaimKey, resource_version: str) -> bool:
        return bool(resource_version) and self._claim_versions.get(key) == resource_version

    # -- slices ---------------------------------------------------------------------------

    def put_slice(self, resource_slice: ResourceSlice, resource_version: str = "") -> set[str]:
        """Store a slice; returns the drivers whose pools changed (two if the driver did)."""
        name = resource_slice.metadata.name
        touched = self.remove_slice(name)
        key = (resource_slice.spec.driver, resource_slice.spec.pool.name)
        state = self._pool(key)
        state.slices[name] = resource_slice
        state.answers.clear()
        self._pool_names.setdefault(key[0], set()).add(key[1])
        self._slice_pool[name] = key
        _remember(self._slice_versions, name, resource_version)
        return touched | {key[0]}

    def remove_slice(self, name: str, uid: str = "") -> set[str]:
        """Forget slice ``name`` (if given, only the one of ``uid``); returns the drivers whose
        pools changed."""
        key = self._slice_pool.get(name)
        if key is not None and not _same_object(self._pools[key].slices[name].metadata.uid, uid):
            return set()
        self._slice_versions.pop(name, None)
        self._slice_pool.pop(name, None)
        if key is None:
            return set()
        state = self._pools[key]
        del state.slices[name]
        state.answers.clear()
        if not state.slices:
            names = self._pool_names[key[0]]
            names.discard(key[1])
            if not names:
                del self._pool_names[key[0]]
        self._drop_if_empty(key)
        return {key[0]}

    def slice_names(self) -> set[str]:
        return set(self._slice_pool)

    # -- claims ---------------------------------------------------------------------------

    def put_claim(self, claim: ResourceClaim, resource_version: str = "") -> None:
        """Keep only what allocated claims hold: other claims cannot make a device allocated."""
        key = Key(CLAIM, claim.metadata.namespace or "", claim.metadata.name)
        held = held_devices(claim)
        # repr too: equal quantities may differ in format, which the sums print.
        if held and self.claims.get(key) == held and repr(self.claims[key]) == repr(held):
            # e.g. a reservation changed: nothing any pool's answer depends on.
            _remember(self._claim_versions, key, resource_version)
            _remember(self._claim_uids, key, claim.metadata.uid)
            return
        self.remove_claim(key)
        if not held:
            return
        self.claims[key] = held
        _remember(self._claim_versions, key, resource_version)
        _remember(self._claim_uids, key, claim.metadata.uid)
        for pool_key in dict.fromkeys((h.driver, h.pool) for h in held):
            state = self._pool(pool_key)
            state.held[key] = tuple(h for h in held if (h.driver, h.pool) == pool_key)
            state.answers.clear()

    def remove_claim(self, key: ClaimKey, uid: str = "") -> None:
        """Forget claim ``key`` (if given, only the one of ``uid``)."""
        if not _same_object(self._claim_uids.get(key, ""), uid):
            return
        self._claim_versions.pop(key, None)
        self._claim_uids.pop(key, None)
        held = self.claims.pop(key, ())
        for pool_key in dict.fromkeys((h.driver, h.pool) for h in held):
            state = self._pools[pool_key]
            del state.held[key]
            state.answers.clear()
            self._drop_if_empty(pool_key)

    # -- taint rules ----------------------------------------------------------------------

    def put_rule(self, rule: DeviceTaintRule) -> None:
        if self.rules.get(rule.metadata.name) == rule:
            return  # a re-delivery must not throw every pool's kept answer away
        self.rules[rule.metadata.name] = rule
        self._rules_epoch += 1

    def remove_rule(self, name: str, uid: str = "") -> None:
        """Forget rule ``name`` (if given, only the one of ``uid``)."""
        rule = self.rules.get(name)
        if rule is not None and _same_object(rule.metadata.uid, uid):
            del self.rules[name]
            self._rules_epoch += 1

    # -- requests -------------------------------------------------------------------------

    def put_request(self, surface: Surface, request: ResourcePoolStatusRequest) -> RequestEntry:
        entry = RequestEntry(surface, request)
        self.requests[entry.key] = entry
        return entry

    def remove_request(self, key: RequestKey, uid: str = "") -> RequestEntry | None:
        """Forget request ``key`` (if given, only the one of ``uid``); returns what was removed."""
        entry = self.requests.get(key)
        if entry is None or not _same_object(entry.uid, uid):
            return None
        return self.requests.pop(key)

    def pending_of_driver(self, driver: str) -> Iterator[RequestEntry]:
        return (e for e in self.requests.values() if e.pending and e.request.spec.driver == driver)

    def pending_count(self, group: str) -> int:
        return sum(1 for e in self.requests.values() if e.pending and e.surface.group == group)

    # -- reading --------------------------------------------------------------------------

    def pool_results(self, spec: RequestSpec, with_rules: bool) -> list[PoolResult]:
        """:func:`status.compute_pools` for ``spec`` on the cached objects, from kept answers
        where nothing they depend on changed."""
        driver = spec.driver
        names: Iterable[str] = self._pool_names.get(driver, ())
        if spec.pool_name is not None:
            names = [spec.pool_name] if spec.pool_name in names else []
        driver_rules = rules_for_driver(self.rules.values(), driver) if with_rules else []
        memo_key = (spec.default_partition_type_attribute, self._rules_epoch if with_rules else -1)
        results = []
        for name in sorted(names):
            state = self._pools[(driver, name)]
            answer = state.answers.get(memo_key)
            if answer is None:
                pool = build_pool(driver, name, state.slices.values())
                held = [h for claim in sorted(state.held) for h in state.held[claim]]
                answer = pool_result(pool, held, driver_rules, spec.default_partition_type_attribute)
                if len(state.answers) >= _MEMO_VARIANTS:
                    state.answers.clear()
                state.answers[memo_key] = answer
            results.append(answer)
        return results

    # -- internals ------------------------------------------------------------------------

    def _pool(self, key: PoolId) -> _PoolState:
        state = self._pools.get(key)
        if state is None:
            state = self._pools[key] = _PoolState()
        return state

    def _drop_if_empty(self, key: PoolId) -> None:
        state = self._pools[key]
        if not state.slices and not state.held:
            del self._pools[key]


def _same_object(cached_uid: str, uid: str) -> bool:
    # An unknown UID on either side (a body or an object that carries none) cannot tell two
    # objects of one name apart, so the name alone decides.
    return not uid or not cached_uid or cached_uid == uid


def _remember(values: dict[K, str], key: K, value: str) -> None:
    """Keep a resourceVersion or UID; an empty one is unknown, so what an older version left goes."""
    if value:
        values[key] = value
    else:
        values.pop(key, None)
