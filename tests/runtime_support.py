"""An operator's runtime over a fake API client, wired as the operator's command wires it."""

from __future__ import annotations

from typing import Any, cast

from operators.core.client import KubeClient
from operators.core.events import EventRecorder
from operators.core.health import Health
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
