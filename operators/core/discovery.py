"""API-version discovery: which version of a resource the cluster serves.

Operators name the versions they understand in order of preference; the first one whose
discovery document lists the resource wins. Sub-resources (``status``) are reported too, so
an operator can tell whether it may write status through that version.

The runtime asks for every kind an operator declares, before each ``prepare()``
(:meth:`~.runtime.Runtime.discover`); operators read its answer and never ask themselves. One
round of questions shares its documents (:data:`Documents`): each group version is fetched once,
however many kinds it serves.
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


Documents = dict[tuple[str, str], dict[str, ServedResource]]
"""The group versions asked in one round: (group, version) -> :func:`resources_of`'s answer."""


async def resources_of(client: KubeClient, group: str, version: str) -> dict[str, ServedResource]:
    """The resources of one group version, or an empty mapping when it is not served; raises
    :class:`~.client.ApiError` when the server cannot tell."""
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    try:
        doc = await client.get(path)
    except ApiError as err:
        # Only a 404 says the group version is not served. A 503 (an APIService whose backend is
        # down, an API server starting or stopping) says nothing about it, as client-go counts it
        # a failed group version and not a missing one: taken as unserved, it made a follower
        # restart the process onto an older version, and back once the answer came.
        if err.not_found:
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
    client: KubeClient, group: str, plural: str, versions: Sequence[str], asked: Documents | None = None
) -> ServedResource | None:
    """The first of ``versions`` (in order of preference) that serves ``plural``; a group version
    already in ``asked`` is not fetched again, and one fetched is added to it."""
    for version in versions:
        resources = asked.get((group, version)) if asked is not None else None
        if resources is None:
            resources = await resources_of(client, group, version)
            if asked is not None:
                asked[(group, version)] = resources
        resource = resources.get(plural)
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
