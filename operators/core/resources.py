"""Where a kind lives in the API: the one way every operator builds a request path."""

from __future__ import annotations

from dataclasses import dataclass

# What would make a name more than one segment of the request path, or the path of another object:
# the names of tenants' objects (a claim's reservedFor) reach paths unchecked by the API server.
_NOT_IN_A_SEGMENT = frozenset("/%?#")


class InvalidPathSegment(ValueError):
    """A name that cannot be one segment of a request path, so no object can have it: ``.``,
    ``..``, or one with ``/``, ``%``, ``?`` or ``#``. client-go refuses the same names (and
    escapes ``?`` and ``#``, which no kind requested here allows)."""


def _segment(name: str) -> str:
    if name in ("", ".", "..") or not _NOT_IN_A_SEGMENT.isdisjoint(name):
        raise InvalidPathSegment(f"{name!r} cannot be a name in a request path")
    return name


@dataclass(frozen=True)
class ApiResource:
    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, name: str | None = None, *, namespace: str | None = None, subresource: str | None = None
    ) -> str:
        """The collection, or one object (and its subresource); ``namespace=None`` on a namespaced
        kind is the collection across all namespaces. Raises :class:`InvalidPathSegment` for a
        name or namespace that would address something else."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            root += f"/namespaces/{_segment(namespace)}"
        path = f"{root}/{self.plural}"
        if name is not None:
            path += f"/{_segment(name)}"
            if subresource:
                path += f"/{subresource}"
        return path


CORE = ""
"""The group of the core kinds (pods, nodes, namespaces, events, ...)."""

PODS = ApiResource(CORE, "v1", "pods")
NODES = ApiResource(CORE, "v1", "nodes", namespaced=False)
NAMESPACES = ApiResource(CORE, "v1", "namespaces", namespaced=False)
EVENTS = ApiResource(CORE, "v1", "events")
SECRETS = ApiResource(CORE, "v1", "secrets")
CONFIG_MAPS = ApiResource(CORE, "v1", "configmaps")
LEASES = ApiResource("coordination.k8s.io", "v1", "leases")
TOKEN_REVIEWS = ApiResource("authentication.k8s.io", "v1", "tokenreviews", namespaced=False)
SUBJECT_ACCESS_REVIEWS = ApiResource("authorization.k8s.io", "v1", "subjectaccessreviews", namespaced=False)
SELF_SUBJECT_ACCESS_REVIEWS = ApiResource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", namespaced=False
)
