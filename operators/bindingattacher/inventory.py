"""Mirroring the Test action's fake backend inventory into a ConfigMap (spec §10.7).

The Test action calls its listener synchronously after every change. :class:`InventoryMirror`
keeps only the newest content per ConfigMap and writes it with server-side apply, one write in
flight per ConfigMap: changes that arrive during a write are coalesced into the next one.
Several policies may name the same ConfigMap: each publishes its own part (its own attachment
keys), and the mirror writes their union, because every apply carries the whole ``data``
of our field manager and would otherwise remove the other policy's keys.
The mirror is what lets a test see calls made by a process it then kills, and what a
restarted process loads back (:meth:`InventoryMirror.load`), so the counters survive restarts.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from operators.core.client import ApiError, KubeClient

if TYPE_CHECKING:
    from operators.core.runtime import Spawn

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0


class InventoryMirror:
    def __init__(self, client: KubeClient, namespace: str, field_manager: str, spawn: Spawn) -> None:
        self._spawn = spawn
        self.client = client
        self.namespace = namespace
        self.field_manager = field_manager
        self._parts: dict[str, dict[str, dict[str, str]]] = {}
        self._dirty: set[str] = set()
        self._writers: dict[str, asyncio.Task[None]] = {}

    def path(self, name: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/configmaps/{name}"

    async def load(self, name: str) -> dict[str, str]:
        try:
            body: dict[str, Any] = await self.client.get(self.path(name))
        except ApiError as err:
            if err.not_found:
                return {}
            raise
        return dict(body.get("data") or {})

    def listener(self, name: str, owner: str) -> Any:
        def publish(data: dict[str, str]) -> None:
            self._parts.setdefault(name, {})[owner] = dict(data)
            self._dirty.add(name)
            writer = self._writers.get(name)
            if writer is None or writer.done():
                self._writers[name] = self._spawn(self._write(name), f"mirror-{name}")

        return publish

    async def _write(self, name: str) -> None:
        while name in self._dirty:
            self._dirty.discard(name)
            data: dict[str, str] = {}
            for part in self._parts.get(name, {}).values():
                data.update(part)
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": self.namespace},
                "data": data,
            }
            try:
                await self.client.apply(self.path(name), body, self.field_manager)
            except ApiError as err:
                log.warning("could not mirror the test inventory into ConfigMap %s: %s", name, err)
                self._dirty.add(name)
                await asyncio.sleep(RETRY_SECONDS)

    async def close(self) -> None:
        for task in self._writers.values():
            task.cancel()
        await asyncio.gather(*self._writers.values(), return_exceptions=True)
