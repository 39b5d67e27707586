"""Whether the operator's own namespace exists, and what to tell the user when it does not.

An operator writes into its namespace (the leader-election Lease, the bindingattacher's ledger).
When the namespace is missing, as when a checkout runs against a cluster where
``kubectl apply -k manifests/`` never ran, every such write fails with 404
``namespaces "X" not found``, once per retry, while everything else looks healthy. So the
runtime asks at start and every :data:`CHECK_SECONDS`; while the answer is "missing" the
operator is not ready, says once what to create or which ``--namespace`` to pass, and the
operators that report conditions carry the same sentence (:attr:`NamespaceState.problem`).

The check is a GET of the namespace. The shipped RBAC does not grant it, and needs not: in a Pod
the namespace exists by construction (the Pod runs in it), so a 403 counts as "present" and the
check stops, since asking again cannot tell more.

:func:`presence` and :func:`problem` are the decisions, pure; :class:`NamespaceState` holds the
answer for readiness and the operators; the runtime owns the polling loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .client import ApiError, KubeClient
from .resources import NAMESPACES

log = logging.getLogger(__name__)

CHECK_SECONDS = 10.0


class Presence(enum.StrEnum):
    UNCHECKED = "Unchecked"
    """No answer yet that tells (the API server is unreachable or failing)."""
    PRESENT = "Present"
    TERMINATING = "Terminating"
    MISSING = "Missing"
    UNKNOWABLE = "Unknowable"
    """Reading namespaces is forbidden: taken as present (see the module docstring)."""

    @property
    def usable(self) -> bool:
        return self in (Presence.PRESENT, Presence.UNKNOWABLE)


def presence(status: int, body: Mapping[str, Any] | None = None) -> Presence | None:
    """The answer to ``GET /api/v1/namespaces/<name>`` (``status`` 200 with its ``body``, else the
    error's status); None when it tells nothing (transport errors, 401, 5xx)."""
    if status == 200:
        phase = ((body or {}).get("status") or {}).get("phase")
        return Presence.TERMINATING if phase == "Terminating" else Presence.PRESENT
    if status == 404:
        return Presence.MISSING
    if status == 403:
        return Presence.UNKNOWABLE
    return None


@dataclass(frozen=True)
class Problem:
    reason: str
    message: str


def problem(namespace: str, found: Presence, purpose: str) -> Problem | None:
    """Why the operator cannot work in ``namespace``, as one sentence with the remedy."""
    if found is Presence.MISSING:
        return Problem(
            "NamespaceMissing",
            f'namespace "{namespace}" does not exist (it holds {purpose}): create it with '
            f'"kubectl create namespace {namespace}" or "kubectl apply -k manifests/", '
            "or pass --namespace with an existing namespace",
        )
    if found is Presence.TERMINATING:
        return Problem(
            "NamespaceTerminating",
            f'namespace "{namespace}" is being deleted (it holds {purpose}): create it again once it '
            "is gone, or pass --namespace with another namespace",
        )
    return None


def announcement(namespace: str, before: Presence, after: Presence, purpose: str) -> tuple[int, str] | None:
    """The log line (level, text) for a change of the answer; None when nothing is worth saying."""
    if after is before:
        return None
    found = problem(namespace, after, purpose)
    if found is not None:
        return logging.WARNING, f"{found.message}; not ready, checking again every {CHECK_SECONDS:.0f}s"
    if after is Presence.PRESENT and before is not Presence.UNCHECKED:
        return logging.INFO, f'namespace "{namespace}" exists now'
    if after is Presence.UNKNOWABLE:
        return logging.INFO, f'may not read namespace "{namespace}" (403); assuming it exists'
    return None


@dataclass
class NamespaceState:
    """The latest answer for the operator's namespace; listeners hear of every change."""

    name: str
    purpose: str
    presence: Presence = Presence.UNCHECKED
    _listeners: list[Callable[[], None]] = field(default_factory=list)
    _usable: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def problem(self) -> Problem | None:
        return problem(self.name, self.presence, self.purpose)

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def update(self, found: Presence | None) -> bool:
        """Take an answer (None: no answer); True when the presence changed."""
        if found is None or found is self.presence:
            return False
        said = announcement(self.name, self.presence, found, self.purpose)
        if said is not None:
            log.log(*said)
        self.presence = found
        if found.usable:
            self._usable.set()
        else:
            self._usable.clear()
        for listener in self._listeners:
            listener()
        return True

    async def wait_usable(self) -> None:
        await self._usable.wait()


async def ask(client: KubeClient, name: str) -> Presence | None:
    try:
        body = await client.get(NAMESPACES.path(name))
    except ApiError as err:
        found = presence(err.status)
        if found is None:
            log.debug("could not check namespace %s: %s", name, err)
        return found
    return presence(200, body)
