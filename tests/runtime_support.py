"""An operator's runtime over a fake API client, wired as the operator's command wires it, and
the fake API server most controller tests need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from operators.core.client import KubeClient
from operators.core.events import EventRecorder
from operators.core.health import Health
from operators.core.keys import Key
from operators.core.namespace import NamespaceState
from operators.core.runtime import Kind, Runtime
from operators.core.settings import OperatorSettings
from operators.core.workqueue import WorkQueue


def unit_runtime(
    client: object,
    name: str,
    settings: OperatorSettings,
    *,
    kinds: tuple[Kind, ...] = (),
    field_manager: str = "",
    events: bool = True,
    own_namespace: NamespaceState | None = None,
) -> Runtime:
    """The runtime of operator ``name`` reading and writing through ``client``; with ``events``
    False it has no event recorder, so that a test fails on any Event it did not expect."""
    kube = cast(KubeClient, client)
    return Runtime(
        name=name,
        settings=settings,
        client=kube,
        reader=kube,
        events=EventRecorder(kube, f"dra-operators-{name}") if events else cast(Any, None),
        health=Health(),
        queue=WorkQueue(f"{name}-unit"),
        field_manager=field_manager,
        own_namespace=own_namespace,
        kinds=kinds,
    )


@dataclass
class ServingClient:
    """An API server that serves the group versions in ``discovery`` (any other one serves no
    resources) and records each write as (verb, path, body). A server-side apply is recorded as
    the PATCH it is on the wire, so that "only patches" covers both ways of patching."""

    discovery: dict[str, dict[str, Any]]
    calls: list[tuple[str, str, Any]] = field(default_factory=list)

    async def get(self, path: str, **_: Any) -> Any:
        return self.discovery.get(path, {"resources": []})

    async def create(self, path: str, body: dict[str, Any], **_: Any) -> Any:
        self.calls.append(("create", path, body))
        return body

    async def apply(self, path: str, body: dict[str, Any], field_manager: str, **_: Any) -> Any:
        self.calls.append(("patch", path, body))
        return body

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        self.calls.append(({"PATCH": "patch", "DELETE": "delete"}[method], path, body))
        return None


async def drain(queue: WorkQueue[Key]) -> set[Key]:
    """Every key queued now (delayed ones not yet due stay), each taken and marked done."""
    queue.open()
    taken: set[Key] = set()
    while len(queue):
        key = await queue.get()
        taken.add(key)
        queue.done(key)
    return taken
