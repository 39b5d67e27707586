"""What the attacher's controller, :class:`~.policysync.PolicySync` and
:class:`~.pipeline.ClaimPipeline` share, in one object built once from the runtime.

The three work on one cache, through one API layer and one call tracker, and hand each other
work only through the queue: a policy whose readiness changed queues its driver's claims, and a
claim whose status write was refused queues its driver's policy. None of them holds another, so
each can be built, and tested, from a :class:`Collaborators` alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from operators.core.client import KubeClient
from operators.core.events import EventRecorder
from operators.core.keys import Key
from operators.core.namespace import NamespaceState, Problem
from operators.core.workqueue import WorkQueue

from .cache import ClusterCache
from .calls import CallTracker
from .kube import InventoryMirror, Kube, LedgerWriter, Lookups, StatusWriter, TaintRules
from .settings import Settings

if TYPE_CHECKING:
    from operators.core.runtime import Runtime


@dataclass(frozen=True)
class Collaborators:
    settings: Settings
    client: KubeClient
    """The controller's writes; live reads go through the runtime's reader (see :meth:`of`)."""
    events: EventRecorder
    queue: WorkQueue[Key]
    cache: ClusterCache
    kube: Kube
    calls: CallTracker
    mirror: InventoryMirror
    field_manager: str
    own_namespace: NamespaceState | None = None
    """The ledger's namespace, as the runtime keeps checking it; None in a unit test without one."""

    @classmethod
    def of(cls, runtime: Runtime) -> Collaborators:
        settings = runtime.settings
        assert isinstance(settings, Settings)
        client = runtime.client
        cache = ClusterCache()
        return cls(
            settings=settings,
            client=client,
            events=runtime.events,
            queue=runtime.queue,
            cache=cache,
            kube=Kube(
                # Live reads go through the reader's token bucket, like the runtime's listings, so
                # they never wait behind (or delay) the controller's writes.
                claims=StatusWriter(runtime, runtime.reader, cache, settings.enable_test_actions),
                ledger=LedgerWriter(runtime, cache.records, settings.namespace),
                lookups=Lookups(runtime.reader),
                taints=TaintRules(runtime),
            ),
            calls=CallTracker(
                settings.max_concurrent_actions, runtime.spawn, settings.max_actions_per_policy
            ),
            mirror=InventoryMirror(runtime, settings.namespace, runtime.spawn),
            field_manager=runtime.field_manager,
            own_namespace=runtime.own_namespace,
        )

    def namespace_problem(self) -> Problem | None:
        """What keeps the ledger's namespace from being used, if anything (policies' Ready says it)."""
        return self.own_namespace.problem if self.own_namespace is not None else None

    def taint_rules_served(self) -> bool:
        """Whether failure taints can be written: the controller's prepare() sets the version."""
        return self.kube.taints.api is not None
