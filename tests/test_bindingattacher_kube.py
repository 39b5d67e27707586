"""The Test action's inventory mirror: coalesced applies of the union of every policy's part."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from bindingattacher_builders import Writes, spawn

from operators.bindingattacher.kube import InventoryMirror, Lookups
from operators.bindingattacher.models import ConsumerReference
from operators.core.client import ApiError, KubeClient
from operators.core.events import EventRecorder


class FakeClient:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []
        self.stored: dict[str, Any] | None = None

    async def apply(
        self, path: str, body: dict[str, Any], field_manager: str, force: bool = True, want_reply: bool = True
    ) -> Any:
        await asyncio.sleep(0)
        self.applied.append(body)
        self.stored = body
        return body

    async def get(self, path: str, **params: str) -> Any:
        if self.stored is None:
            raise ApiError(404, "NotFound", "not found")
        return self.stored


async def test_parts_of_several_policies_are_written_together() -> None:
    client = FakeClient()
    writes = Writes(cast(KubeClient, client), cast(EventRecorder, None), "fm")
    mirror = InventoryMirror(writes, "dra-operators", spawn)
    assert await mirror.load("inv") == {}
    fabric = mirror.listener("inv", "fabric")
    nic = mirror.listener("inv", "nic")
    fabric({"da-1": "a"})
    fabric({"da-1": "b"})
    nic({"da-2": "c"})
    for _ in range(10):
        await asyncio.sleep(0)
    await mirror.close()
    assert client.applied[-1]["data"] == {"da-1": "b", "da-2": "c"}
    assert len(client.applied) <= 2, "changes during a write are coalesced"
    assert client.applied[-1]["metadata"] == {"name": "inv", "namespace": "dra-operators"}
    assert await mirror.load("inv") == {"da-1": "b", "da-2": "c"}


async def test_only_reserved_names_a_pod_can_have_are_looked_up() -> None:
    """reservedFor takes any name: pasted into a path, ``.`` would list every pod of the namespace."""

    class Pods:
        def __init__(self) -> None:
            self.paths: list[str] = []

        async def get(self, path: str, **params: str) -> Any:
            self.paths.append(path)
            return {"metadata": {"name": "web-0", "namespace": "ns", "uid": "u"}}

    client = Pods()
    consumers = [
        ConsumerReference(resource="pods", name=name, uid="u") for name in ("web-0", ".", "web-0/status")
    ]
    found = await Lookups(cast(KubeClient, client)).pods("ns", consumers)
    assert client.paths == ["/api/v1/namespaces/ns/pods/web-0"]
    assert [pod.metadata.name for pod in found] == ["web-0"]
