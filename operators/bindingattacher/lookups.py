"""Point reads of objects the attacher does not watch (spec §6, §15.3).

Pods and Nodes are not watched: a cluster-wide pod watch is the largest memory cost of a DRA
controller, and the attacher needs only the few pods named in a claim's ``reservedFor``. Pods
are read when a decision depends on them (node fallback, "is a consumer bound"), with a one
second memo that collapses the reads of one burst of syncs; Nodes are read for the action
request with a 60 s TTL.

Device details for actions come from one list of the driver's ResourceSlices with
``fieldSelector=spec.driver=<driver>`` (a field the API server indexes), memoized for a few
seconds, instead of a permanent watch per driver: actions read them only when a call starts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from operators.core.client import ApiError, KubeClient
from operators.core.models import parse_or_skip

from .models import ActionDevice, ConsumerReference, Node, Pod, ResourceSlice
from .requests import published_device

log = logging.getLogger(__name__)

POD_MEMO_SECONDS = 1.0
NODE_TTL_SECONDS = 60.0
SLICE_TTL_SECONDS = 5.0
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"

V = TypeVar("V")


@dataclass
class _Entry(Generic[V]):
    value: V
    at: float


class _TtlCache(Generic[V]):
    def __init__(self, ttl: float, limit: int = 4096) -> None:
        self.ttl = ttl
        self.limit = limit
        self._entries: dict[str, _Entry[V]] = {}

    def get(self, key: str) -> _Entry[V] | None:
        entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry.at <= self.ttl:
            return entry
        return None

    def put(self, key: str, value: V) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = _Entry(value, time.monotonic())


class Lookups:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._pods: _TtlCache[Pod | None] = _TtlCache(POD_MEMO_SECONDS)
        self._nodes: _TtlCache[Node | None] = _TtlCache(NODE_TTL_SECONDS)
        self._slices: _TtlCache[tuple[ResourceSlice, ...]] = _TtlCache(SLICE_TTL_SECONDS, limit=256)

    async def pods(self, namespace: str, consumers: Sequence[ConsumerReference]) -> list[Pod]:
        """The consumer pods that exist with the UID the claim names (others are left out)."""
        found = []
        for consumer in consumers:
            pod = await self._pod(namespace, consumer.name)
            if pod is not None and pod.metadata.uid == consumer.uid:
                found.append(pod)
        return found

    async def _pod(self, namespace: str, name: str) -> Pod | None:
        key = f"{namespace}/{name}"
        cached = self._pods.get(key)
        if cached is not None:
            return cached.value
        body = await self._get_or_none(f"/api/v1/namespaces/{namespace}/pods/{name}")
        pod = _parse(Pod, body)
        self._pods.put(key, pod)
        return pod

    async def node(self, name: str | None) -> Node | None:
        """The Node for an action request; a failed read gives None (the request then lacks details)."""
        if not name:
            return None
        cached = self._nodes.get(name)
        if cached is not None:
            return cached.value
        try:
            node = _parse(Node, await self._get_or_none(f"/api/v1/nodes/{name}"))
        except ApiError as err:
            log.warning("could not read Node %s: %s", name, err)
            return None
        self._nodes.put(name, node)
        return node

    async def device(self, driver: str, pool: str, device: str) -> ActionDevice | None:
        """The device as currently published, or None (no longer published, or the read failed)."""
        cached = self._slices.get(driver)
        if cached is not None:
            slices = cached.value
        else:
            try:
                listing = await self.client.get(SLICES_PATH, fieldSelector=f"spec.driver={driver}")
            except ApiError as err:
                log.warning("could not list the ResourceSlices of %s: %s", driver, err)
                return None
            parsed = (_parse(ResourceSlice, item) for item in listing.get("items", []))
            slices = tuple(s for s in parsed if s is not None)
            self._slices.put(driver, slices)
        return published_device(slices, driver, pool, device)

    async def _get_or_none(self, path: str) -> Any:
        try:
            return await self.client.get(path)
        except ApiError as err:
            if err.not_found:
                return None
            raise


M = TypeVar("M", Pod, Node, ResourceSlice)


def _parse(model: type[M], body: Any) -> M | None:
    if body is None:
        return None
    return parse_or_skip(model, body, log)
