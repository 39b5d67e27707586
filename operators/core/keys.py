"""The one work-queue key of every controller, as upstream's ``namespace/name`` string key and
controller-runtime's ``Request``, with the kind in the type instead of a string prefix.

A controller's ``sync(key)`` dispatches on :attr:`Key.kind`; the kinds are the controller's own
constants (the ones several controllers share are here). Periodic or singleton work (a sweep, a
re-discovery) is a :meth:`Key.periodic` key, run by :meth:`~.workqueue.WorkQueue.every`.

Keys are made for every watch event (50 000 pods): a frozen, slotted dataclass, with no
validation, whose hash and equality are the generated ones over its four strings.
"""

from __future__ import annotations

from dataclasses import dataclass

POD = "pod"
CLAIM = "claim"
PERIODIC = "periodic"
"""The kind of :meth:`Key.periodic` keys: work that no object names (a sweep, a re-discovery)."""


@dataclass(frozen=True, slots=True, order=True)
class Key:
    """What a work-queue entry names: ``kind`` says which sync runs it, ``namespace`` is empty for
    cluster-scoped objects and periodic work.

    ``uid`` is empty unless the controller's work is about one incarnation of an object rather
    than its name: a re-created object of the same name is then another key, so that the work
    left for the deleted one (bindingattacher's records of a deleted claim, devicetaint's eviction
    of a replaced pod) is neither merged into nor mistaken for the new one's.
    """

    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def periodic(cls, name: str) -> Key:
        """The key of periodic or singleton work, such as ``Key.periodic("ttl-sweep")``."""
        return cls(PERIODIC, "", name)

    def __str__(self) -> str:
        # "claim team-a/gpu", "rule evict-gpu-3", "periodic ttl": what logs name.
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"
