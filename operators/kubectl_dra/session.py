"""The plugin's I/O plumbing: connecting, discovery, temporary objects and waiting.

Every API failure becomes a :class:`~.errors.PluginError` whose message says what was being done,
so the user sees one sentence instead of a traceback. Objects the plugin creates for a question
(a pool status request, a dry-run DeviceTaintRule) are deleted again whatever happens, with a
UID precondition so that an object of the same name created by someone else is never removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from operators.core.client import ApiError, KubeClient, load_configuration
from operators.core.discovery import ServedResource, resources_of
from operators.core.serverversion import refusal
from operators.core.settings import ConfigurationError
from operators.dra.api import GROUP
from operators.dra.taintrules import PLURAL as RULES_PLURAL
from operators.dra.taintrules import VERSIONS as RULE_VERSIONS

from .errors import Forbidden, NoAnswer, PluginError

T = TypeVar("T")
POLL_INTERVAL = 0.25


def describe(err: ApiError, doing: str, server: str) -> PluginError:
    if err.status == 0:
        return PluginError(f"cannot reach the API server at {server}: {err.message}")
    if err.status == 401:
        return PluginError(f"the API server at {server} rejected the credentials (401 Unauthorized)")
    if err.status == 403:
        return Forbidden(f"forbidden while {doing}: {err.message}")
    status = f"{err.status} {err.reason}".strip()
    return PluginError(f"{doing} failed: {status}: {err.message}")


class Session:
    def __init__(self, client: KubeClient) -> None:
        self.client = client

    @classmethod
    async def connect(cls, kubeconfig: str | None, context: str | None) -> Session:
        """Credentials found as the operators find them (``--kubeconfig``, ``$KUBECONFIG``, the
        in-cluster service account, ``~/.kube/config``)."""
        try:
            configuration = await load_configuration(kubeconfig, context)
        except ConfigurationError as err:
            raise PluginError(str(err)) from err
        # A user tool asks a handful of questions; the operators' 20 QPS limit would only slow it.
        return cls(KubeClient(configuration, qps=100, burst=200, user_agent="kubectl-dra"))

    async def close(self) -> None:
        await self.client.close()

    async def check_server_version(self) -> None:
        """Refuse a Kubernetes the project does not support, in the operators' own words; a server
        whose ``/version`` cannot be read (403, 404) is not refused here: the questions that follow
        tell what is wrong with it."""
        try:
            document = await self.client.get("/version")
        except ApiError as err:
            if err.status in (403, 404):
                return
            raise describe(err, "reading the server version", self.client.server) from err
        refused = refusal(document if isinstance(document, dict) else {})
        if refused is not None:
            raise PluginError(refused)

    async def call(self, doing: str, request: Awaitable[T]) -> T:
        try:
            return await request
        except ApiError as err:
            raise describe(err, doing, self.client.server) from err

    async def get(self, doing: str, path: str, **params: str) -> Any:
        return await self.call(doing, self.client.get(path, **params))

    async def items(self, doing: str, path: str, **params: str) -> list[dict[str, Any]]:
        """Every item of a collection, following ``continue`` tokens."""
        result: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await self.get(
                doing, path, limit="500", **({"continue": token} if token else {}), **params
            )
            result.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return result

    async def served(self, group: str, version: str, plural: str) -> ServedResource | None:
        try:
            return (await resources_of(self.client, group, version)).get(plural)
        except ApiError as err:
            raise describe(err, f"discovering {group}/{version}", self.client.server) from err

    async def device_taint_rules(self) -> list[dict[str, Any]]:
        """Every DeviceTaintRule, read in the newest version served; none where no version is."""
        for version in RULE_VERSIONS:
            served = await self.served(GROUP, version, RULES_PLURAL)
            if served is not None:
                return await self.items("listing devicetaintrules", served.path())
        return []

    async def first_served(
        self, group: str, plural: str, versions: Sequence[str], subresource: str = "status"
    ) -> ServedResource | None:
        """The first version serving ``plural`` together with ``subresource``."""
        for version in versions:
            found = await self.served(group, version, plural)
            if found is not None and subresource in found.subresources:
                return found
        return None

    @contextlib.asynccontextmanager
    async def temporary(
        self, what: str, collection: str, body: dict[str, Any]
    ) -> AsyncIterator[dict[str, Any]]:
        """Create an object for the duration of the block, then delete exactly that object."""
        created: dict[str, Any] = await self.call(f"creating {what}", self.client.create(collection, body))
        meta = created["metadata"]
        try:
            yield created
        finally:
            try:
                # Shielded: Ctrl-C cancels the wait above, and the clean-up must still happen.
                await asyncio.shield(self.client.delete(f"{collection}/{meta['name']}", uid=meta["uid"]))
            except ApiError as err:
                if not err.not_found:
                    print(f"warning: could not delete {what} {meta['name']}: {err}", file=sys.stderr)


async def poll(
    fetch: Callable[[], Awaitable[T]], done: Callable[[T], bool], timeout: float, silence: str
) -> T:
    """``fetch()`` until ``done`` holds; :class:`NoAnswer` with ``silence`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await fetch()
        if done(value):
            return value
        if time.monotonic() >= deadline:
            raise NoAnswer(silence)
        await asyncio.sleep(min(POLL_INTERVAL, max(deadline - time.monotonic(), 0)))
