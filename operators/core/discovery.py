"""API-version discovery: which version of a resource the cluster serves.

Operators name the versions they understand in order of preference; the first one whose
discovery document lists the resource wins. Sub-resources (``status``) are reported too, so
an operator can tell whether it may write status through that version.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from .client import ApiError, KubeClient
from .resources import ApiResource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServedResource(ApiResource):
    kind: str = ""
    subresources: frozenset[str] = frozenset()


async def resources_of(client: KubeClient, group: str, version: str) -> dict[str, ServedResource]:
    """The resources of one group version, or an empty mapping when it is not served."""
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    try:
        doc = await client.get(path)
    except ApiError as err:
        if err.status in (404, 503):
            return {}
        raise
    served: dict[str, ServedResource] = {}
    subresources: dict[str, set[str]] = {}
    for entry in doc.get("resources", []):
        name = entry.get("name", "")
        if "/" in name:
            parent, sub = name.split("/", 1)
            subresources.setdefault(parent, set()).add(sub)
            continue
        served[name] = ServedResource(
            group, version, name, bool(entry.get("namespaced")), kind=entry.get("kind", "")
        )
    return {
        name: ServedResource(
            r.group, r.version, r.plural, r.namespaced, r.kind, frozenset(subresources.get(name, ()))
        )
        for name, r in served.items()
    }


async def find_served(
    client: KubeClient, group: str, plural: str, versions: Sequence[str]
) -> ServedResource | None:
    """The first of ``versions`` (in order of preference) that serves ``plural``."""
    for version in versions:
        resource = (await resources_of(client, group, version)).get(plural)
        if resource is not None:
            return resource
    return None


async def served_version_change(
    client: KubeClient, group: str, plural: str, versions: Sequence[str], watched: str | None, interval: float
) -> str | None:
    """Return once a version other than ``watched`` (None: not served) serves ``plural``.

    A change must be seen twice in a row, so one odd discovery answer never restarts anyone.
    Used by operators whose watch is fixed at start: kopf cannot add a watch later.
    """
    previous = watched
    while True:
        await asyncio.sleep(interval)
        try:
            served = await find_served(client, group, plural, versions)
        except ApiError as err:
            log.info("discovery of %s/%s failed, trying again later: %s", group or "core", plural, err)
            continue
        seen = served.version if served else None
        if seen != watched and seen == previous:
            return seen
        previous = seen
