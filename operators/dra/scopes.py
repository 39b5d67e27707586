"""What the operators that evaluate a device scope and own the DeviceTaintRules it asks for
(devicehealth's policies, taintselector's selectors) share in their controllers.

Both keep their own objects, ResourceSlices, DeviceClasses, DeviceTaintRules and allocated
ResourceClaims in a cache (:class:`ScopeCache` holds what is the same in both) that names, for each
event, the objects of their own kind it concerns; both evaluate a scope with CEL over every
published device. :class:`ScopeController` holds those watch callbacks, with the debounces that
make a driver republishing fifty slices cost one pass per object, the one-at-a-time evaluation,
and the start's word on the DeviceTaintRule version. Each operator routes the names to its own
work-queue kind (:meth:`ScopeController.route`), since the queue is not the domain's.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from prometheus_client import Counter

from operators.core.models import KubeModel, body_name, forget, store

from .selection import DeviceClass, ResourceSlice
from .unserved import DEVICE_TAINT_RULES_UNSERVED

SLICE_DEBOUNCE_SECONDS = 0.2
RULE_DEBOUNCE_SECONDS = 0.5
# Claims (and pods) change with every workload that comes and goes; nothing needs each one at once.
CLAIM_DEBOUNCE_SECONDS = 1.0

Outcome = TypeVar("Outcome")
Update = Callable[[Mapping[str, Any]], list[str]]
"""A cache method: takes a watched body, names the objects of the operator's kind it concerns."""
Callback = Callable[[Mapping[str, Any]], None]
"""A watch callback of the controller."""


Owner = TypeVar("Owner", bound=KubeModel)


class ScopeCache(Generic[Owner]):
    """The operator's own objects (policies, selectors: the owners of the rules), by name, and the
    ResourceSlices and DeviceClasses their scopes are evaluated over. Pure, as a cache is: each
    event method takes a watched body and returns the names of the owners to reconcile. An update
    whose body does not parse raises :class:`~operators.core.models.UnparsableObject` having changed
    nothing, for the controller makes it the object's deletion (:meth:`ScopeController.upsert`),
    which needs what was kept to name the owners it concerns.

    A slice concerns every owner, as a scope may select any device; which owners a class, a rule
    or a claim concerns is the operator's to say. A deletion answers from what the cache kept, never
    from the body: a tombstone has no spec or status; one that is
    :func:`~operators.core.models.stale` changes nothing.
    """

    def __init__(self, owners: dict[str, Owner], model: type[Owner]) -> None:
        self._owners = owners
        self._model = model
        self.slices: dict[str, ResourceSlice] = {}
        self.classes: dict[str, DeviceClass] = {}

    def upsert_owner(self, body: Mapping[str, Any]) -> list[str]:
        name = body_name(body)
        store(self._owners, name, self._model, body)
        return [name]

    def delete_owner(self, body: Mapping[str, Any]) -> list[str]:
        # Its rules go with the garbage collector; nothing is left to reconcile for it.
        forget(self._owners, body_name(body), body)
        return []

    def upsert_slice(self, body: Mapping[str, Any]) -> list[str]:
        store(self.slices, body_name(body), ResourceSlice, body)
        return self.every_owner()

    def delete_slice(self, body: Mapping[str, Any]) -> list[str]:
        return self.every_owner() if forget(self.slices, body_name(body), body) is not None else []

    def every_owner(self) -> list[str]:
        return sorted(self._owners)


CacheT = TypeVar("CacheT", bound=ScopeCache[Any])


class ApiVersioned(Protocol):
    @property
    def api_version(self) -> str: ...


def _feeding(
    update: str, delay: float, gone: str | None = None
) -> Callable[[ScopeController[Any], Mapping[str, Any]], None]:
    """A watch callback that feeds the body to the cache's method ``update`` (one of :data:`Update`)
    and queues what that names after ``delay``; for an upsert, ``gone`` names the controller's
    callback of the object's deletion (:meth:`ScopeController.upsert`)."""

    def feed(controller: ScopeController[Any], body: Mapping[str, Any]) -> None:
        cached = getattr(controller.cache, update)
        if gone is None:
            controller.route(cached, body, delay)
        else:
            controller.upsert(cached, getattr(controller, gone), body, delay)

    feed.__name__ = feed.__qualname__ = update
    return feed


class ScopeController(ABC, Generic[CacheT]):
    """The watch callbacks (synchronous, no API calls) and the scope evaluation of such a controller.
    Its cache has a method of each callback's name."""

    def __init__(self, cache: CacheT) -> None:
        self.cache = cache
        # One evaluation at a time. They are CPU-bound Python in threads, so the GIL already runs
        # them one after another; side by side, each still held its own working set, and over
        # 128 000 devices three selectors at once took the process past its memory limit.
        self._evaluating = asyncio.Lock()

    @abstractmethod
    def route(self, update: Update, body: Mapping[str, Any], delay: float) -> bool:
        """Feed ``body`` to the cache through ``update`` and queue what it names after ``delay``;
        whether the body was read (one that was not is logged)."""

    def upsert(self, update: Update, gone: Callback, body: Mapping[str, Any], delay: float) -> None:
        """:meth:`route` an update; one the cache cannot read is the object's deletion ``gone``. The
        cache must not go on deciding on a version that has since changed, and the owners whose
        passes read that version must run again, as when the object goes: else they go on acting
        on, and reporting, a view the cache no longer holds until something else queues them."""
        if not self.route(update, body, delay):
            gone(body)

    upsert_slice = _feeding("upsert_slice", SLICE_DEBOUNCE_SECONDS, gone="delete_slice")
    delete_slice = _feeding("delete_slice", SLICE_DEBOUNCE_SECONDS)
    upsert_class = _feeding("upsert_class", SLICE_DEBOUNCE_SECONDS, gone="delete_class")
    delete_class = _feeding("delete_class", SLICE_DEBOUNCE_SECONDS)
    upsert_rule = _feeding("upsert_rule", RULE_DEBOUNCE_SECONDS, gone="delete_rule")
    delete_rule = _feeding("delete_rule", RULE_DEBOUNCE_SECONDS)
    upsert_claim = _feeding("upsert_claim", CLAIM_DEBOUNCE_SECONDS, gone="delete_claim")
    delete_claim = _feeding("delete_claim", CLAIM_DEBOUNCE_SECONDS)

    async def select(
        self, evaluate: Callable[[list[ResourceSlice], dict[str, DeviceClass]], Outcome]
    ) -> Outcome:
        """``evaluate(slices, classes)`` over the cache as it is now, in a worker thread: 1000
        devices take a few hundred milliseconds, too long to hold the event loop."""
        async with self._evaluating:
            slices, classes = list(self.cache.slices.values()), dict(self.cache.classes)
            return await asyncio.to_thread(evaluate, slices, classes)


def report_rules_api(log: logging.Logger, rules_api: ApiVersioned | None, unserved: str) -> None:
    """Say at start which DeviceTaintRule version the rules are written as, or, where none is
    served, what the operator does instead (``unserved``)."""
    if rules_api is None:
        log.warning("%s; %s", DEVICE_TAINT_RULES_UNSERVED, unserved)
    else:
        log.info("writing DeviceTaintRules as %s", rules_api.api_version)


def rule_writes_counter(prefix: str) -> Counter:
    """``<prefix>rule_writes_total{operation}``: the DeviceTaintRules an operator created, updated
    and deleted."""
    return Counter(
        f"{prefix}rule_writes",
        "DeviceTaintRule writes, by operation (create, update, delete).",
        ["operation"],
    )
