"""Runs one operator process: kopf informers, our work queue, probes, metrics, leader election.

This is the only core module that imports kopf. The division of labour:

- **The initial listing is ours.** Before kopf starts, the runtime lists every watched kind
  (paginated) and feeds each object to the operator's cache; only then does the work queue
  open, so no decision is ever made on a partial view (after a restart, every claim created
  before the kill is in the cache before any create is attempted).
- **The built-in kinds go through the core's informer** (:mod:`.informer`): it watches on
  from the initial listing's resourceVersion and hands each event to the controller inline.
  kopf's per-event dispatch cost 2.25 ms of CPU per pod event, paid for every pod of the
  cluster (docs/architecture.md).
- **Watches are declared** in the operator's definition (:class:`Watch`), as
  controller-runtime's ``SetupWithManager`` does: the runtime registers them, logs what cannot
  be processed, and restarts the process when the version of a kind served under several
  changes; a kind the operator only reads or writes is declared as :class:`Discovered`.
- **Is it served is the runtime's question.** Before every ``prepare()`` it asks discovery, one
  request per group version, for every declared kind, and keeps the answer where the controller
  reads it (:meth:`Runtime.served_resource`); no controller asks discovery itself. While a kind
  declared ``required`` is not served, ``prepare()`` is not called: one line and the readiness
  answer name what is missing, and the runtime asks again every 30 s.
- Background tasks go through :meth:`Runtime.spawn` and are cancelled at shutdown.
- **kopf watches the project's own kinds** (:data:`KOPF_GROUPS`): each gets one
  ``@kopf.on.event`` handler, registered in a registry of the run's own, which stores nothing
  on the objects. kopf's
  own listing re-delivers every object once (an idempotent upsert), then its watch streams
  changes. Objects of these kinds deleted between the two listings are found by a second
  listing a few seconds after kopf is up, and removed from the cache. An operator without
  such kinds runs no kopf operator at all.
- The **work queue** is level-triggered: every sync recomputes from the cache.

Why not ``@kopf.index`` for the initial listing, as kopf's documentation suggests: kopf holds
every listed object's worker on one shared condition until all kinds are indexed, and wakes all
of them on every object indexed. With thousands of objects that is quadratic: 5000 claims took
minutes instead of seconds (measured; see docs/architecture.md).

Leader election: a replica that does not hold the Lease starts no watch and no worker; it
only serves probes (ready as a standby, see :mod:`.health`). Losing the Lease ends the process
with exit code 1, so a fresh process, with a fresh cache, competes again.

The operator's own namespace, where it needs one (its Lease, the bindingattacher's ledger), is
checked at start and every 10 s (:mod:`.namespace`): while it is missing the ``namespace``
readiness gate is closed, a replica does not compete for the Lease, and the controller hears of
every change through ``Runtime.own_namespace``. The operator stays up, so that it becomes ready
by itself once the namespace is created.

An operator that replaces one of kube-controller-manager's controllers names it in its
definition (``in_tree``): every watched object passes the coexistence guard
(:mod:`.coexistence`) before the cache sees it, and the first sign of the in-tree controller
stops the operator's writes and readiness (:func:`_in_tree_controller_acts`).

Configuration errors (credentials, bind addresses) are raised as
:class:`~.settings.ConfigurationError` before anything starts, for the command line to print.

A Kubernetes older than the project supports (:mod:`.serverversion`, read once from ``/version``
before anything else) gets one ERROR line and the same words as the readiness answer; the process
then starts no controller and waits, live but never ready, until it is stopped: exiting would only
make the kubelet restart it into the same refusal, a crash loop that hides the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

import kopf

from . import PROJECT_GROUP, logs, metricsauth, serverversion
from . import health as health_server
from . import namespace as namespace_check
from .client import ApiError, KubeClient, WriteFence
from .coexistence import Evidence, Guard, InTreeController
from .discovery import Documents, ServedResource, find_served, served_version_change
from .events import EventRecorder, ObjectRef
from .health import APIS_SERVED, Health
from .informer import Informer
from .keys import Key
from .metrics import in_tree_controller, leading, watch_event
from .metricsauth import MetricsAuthorizer
from .models import tombstone
from .namespace import NamespaceState
from .reconcile import Result
from .resources import LEASES, ApiResource
from .settings import InTreeReplacementSettings, OperatorSettings
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

RUNTIME_API_CALLS: tuple[tuple[str, str, str], ...] = (
    # The Events every controller records (events.py).
    ("", "events", "create"),
    ("", "events", "patch"),
    # Secure /metrics: each scrape's token and permission (metricsauth.py).
    *metricsauth.API_CALLS,
    # Leader election, in the operator's own namespace (a Role, not the ClusterRole).
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
)
"""What the runtime itself calls, for every operator: each one's ``API_CALLS`` ends with these."""

LEASE_LOST = 75
"""``run``'s answer when the Lease was lost: every write has stopped, and the caller starts a new
run, which waits as a standby and rebuilds its state from the cluster. Not an exit of the process:
an API server outage longer than the renew deadline costs every replica its Lease, and a container
restart would add the kubelet's back-off to the outage."""

DISCOVERY_RETRY_SECONDS = 30.0
API_PING_SECONDS = 10.0
# How soon /version is asked again while the API server cannot answer at start.
VERSION_RETRY_SECONDS = 5.0
# How often the served version of a discovered watch is asked again (see Watch.versions).
REDISCOVERY_SECONDS = 60.0

ControllerT = TypeVar("ControllerT")

Spawn = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]
"""How a component starts a background task: :meth:`Runtime.spawn`, which cancels it at shutdown."""


class Controller(Protocol):
    """What an operator implements; kopf never appears in it."""

    async def prepare(self) -> bool:
        """Start checks, once every required kind is served: what the runtime found for each
        declared kind is read through :meth:`Runtime.served_resource`. False means 'not ready, ask
        again later'."""

    async def sync(self, key: Key) -> Result | None:
        """Reconcile one work-queue key from the cache, dispatching on ``key.kind``; ``None`` is
        :class:`Done`."""


@dataclass(frozen=True)
class Watch(Generic[ControllerT]):
    """One kind an operator watches, and the controller methods that receive it, as a
    controller-runtime ``SetupWithManager`` declares them: ``upsert(controller, body)`` for every
    listed, added or modified object, ``delete(controller, body)`` for every deleted one. A
    deletion nobody saw happen (during a watch gap, or before the first watch) arrives as a
    :class:`~.models.Tombstone`: metadata only, so ``delete`` reads the object from the controller's
    own cache (:func:`~.models.last_known`), and ignores the tombstone of an object a successor of
    the same name has replaced there (:func:`~.models.superseded`).

    Both must be synchronous, quick, and never raise on odd input; an exception is logged with
    the object's reference, and the event is dropped. The runtime picks the mechanism: the core
    informer for every kind but the project's own (:data:`KOPF_GROUPS`), which kopf watches.
    """

    group: str
    plural: str
    upsert: Callable[[ControllerT, Mapping[str, Any]], None]
    delete: Callable[[ControllerT, Mapping[str, Any]], None]
    version: str = "v1"
    # A kind served under several versions (in order of preference): the first one the cluster
    # serves is watched. None served: the kind is not watched. The runtime keeps asking, and a
    # change of the served version stops the process, for a restart that watches it (a watch
    # cannot be added later). Whatever the versions, what is served is found before prepare() and
    # readable there through Runtime.served_resource.
    versions: tuple[str, ...] = ()
    # Asked once the controller is prepared: False leaves the kind unwatched (e.g. an API
    # surface the operator decided not to serve).
    when: Callable[[ControllerT], bool] | None = None
    # The operator cannot start without it: while it is not served, prepare() is not called, the
    # runtime says what is missing and asks again. False (the default): the controller decides
    # what an unserved kind means, if anything.
    required: bool = False

    @property
    def preferred_versions(self) -> tuple[str, ...]:
        return self.versions or (self.version,)


@dataclass(frozen=True)
class Discovered:
    """A kind the operator reads or writes without watching it, served under several versions (in
    order of preference). Its version is found as a watch's is, before prepare() and readable there
    through Runtime.served_resource (None: no version is served), and followed as a watch's with
    ``versions`` is: once another version is served, the process stops for a restart that uses it."""

    group: str
    plural: str
    versions: tuple[str, ...]
    # Asked once the controller is prepared: False leaves the kind unfollowed (e.g. PodGroups
    # with --workload-claims=off, whose API appearing later must not restart anyone).
    when: Callable[[Any], bool] | None = None
    # As Watch.required: prepare() waits until it is served.
    required: bool = False

    @property
    def preferred_versions(self) -> tuple[str, ...]:
        return self.versions


Kind = Watch[Any] | Discovered
"""A declared kind: what the runtime asks discovery about."""


def describe(kind: Kind) -> str:
    """``resourceclaims in resource.k8s.io/v1``, the words of the not-ready answer."""
    versions = (
        ApiResource(kind.group, version, kind.plural).api_version for version in kind.preferred_versions
    )
    return f"{kind.plural} in {' or '.join(versions)}"


@dataclass(frozen=True)
class OperatorDefinition:
    name: str
    settings_class: type[OperatorSettings]
    default_workers: int
    make_controller: Callable[[Runtime], Controller]
    # The kinds the operator watches, listed (and delivered at start) in this order.
    watches: tuple[Watch[Any], ...] = ()
    # The kinds it uses under a discovered version without watching them.
    discovered: tuple[Discovered, ...] = ()
    # Component name in Events, field manager of writes, Lease name.
    component: str = ""
    # What the operator keeps in its own namespace, for the message when that is missing; empty
    # when it keeps nothing there (then only --leader-elect needs the namespace, for the Lease).
    namespace_use: str = ""
    # kube-controller-manager's controller this operator replaces: the coexistence guard.
    in_tree: InTreeController | None = None
    # Asks that controller before this operator's first write: its evidence, or None.
    ask_in_tree: Callable[[Runtime, InTreeController], Coroutine[Any, Any, Evidence | None]] | None = None

    @property
    def component_name(self) -> str:
        return self.component or f"dra-operators-{self.name}"

    @property
    def kinds(self) -> tuple[Kind, ...]:
        """Every kind it declares, watched or not: what the runtime asks discovery about."""
        return (*self.watches, *self.discovered)

    @property
    def watch_calls(self) -> list[tuple[str, str, str]]:
        """The (API group, resource, verb) of the listing and the watch of every kind it watches: the
        part of its ``API_CALLS`` its watches imply, whichever of the informer or kopf sends them."""
        return [(watch.group, watch.plural, verb) for watch in self.watches for verb in ("list", "watch")]


@dataclass
class Runtime:
    """Everything a controller and its handlers share; kopf hands it over as ``memo.runtime``."""

    name: str
    settings: OperatorSettings
    client: KubeClient
    # Listing and liveness pings: kube-controller-manager's informers have a client of their own.
    reader: KubeClient
    events: EventRecorder
    health: Health
    queue: WorkQueue[Key]
    controller: Any = None
    field_manager: str = ""
    # Set when the operator needs its namespace (see OperatorDefinition.namespace_use).
    own_namespace: NamespaceState | None = None
    # Set by request_stop(): a controller can end the process with a meaningful status,
    # e.g. "restart me, the served APIs changed".
    exit_code: int = 0
    guard: Guard = field(default_factory=lambda: Guard(None, datetime.now(UTC), lambda _: None))
    # The definition's kinds (OperatorDefinition.kinds): what discover() asks about.
    kinds: tuple[Kind, ...] = ()
    # What discover() found for each of them, by (group, plural): the served version, or None.
    served: dict[tuple[str, str], ServedResource | None] = field(default_factory=dict)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _background: set[asyncio.Task[Any]] = field(default_factory=set)

    def listed(self) -> None:
        if not self.queue.is_open:
            self.queue.open()
            self.health.set_gate("initial-listing", True)

    def request_stop(self, exit_code: int = 0) -> None:
        self.exit_code = exit_code or self.exit_code
        self._stop.set()

    def served_resource(self, group: str, plural: str) -> ServedResource | None:
        """The version found served for a declared kind (with its subresources); None when none
        of its versions is served."""
        return self.served.get((group, plural))

    async def ask_served(self) -> dict[tuple[str, str], ServedResource | None]:
        """What the API server serves now of every declared kind, one discovery request per group
        version. Not kept: what served_resource answers is what the process started with."""
        asked: Documents = {}
        return {
            (kind.group, kind.plural): await find_served(
                self.client, kind.group, kind.plural, kind.preferred_versions, asked
            )
            for kind in self.kinds
        }

    async def discover(self) -> list[str]:
        """Find what is served of every declared kind, for served_resource; the required kinds
        that are not served, in the words of :func:`describe`."""
        self.served = await self.ask_served()
        return [
            describe(kind)
            for kind in self.kinds
            if kind.required and self.served_resource(kind.group, kind.plural) is None
        ]

    async def prepare(self) -> bool:
        """What comes before the watches: discovery, then the controller's prepare() once every
        required kind is served. False: not ready (said once, in the log and the readiness
        answer), to be asked again."""
        missing = await self.discover()
        if missing:
            reason = "not served: " + ", ".join(missing)
            log.warning(
                "required APIs are %s; not ready, checking again in %.0fs", reason, DISCOVERY_RETRY_SECONDS
            )
            self.health.set_gate(APIS_SERVED, False, reason)
            return False
        if not await self.controller.prepare():
            log.warning("required APIs are not served yet; checking again in %.0fs", DISCOVERY_RETRY_SECONDS)
            self.health.set_gate(APIS_SERVED, False)
            return False
        self.health.set_gate(APIS_SERVED, True)
        return True

    def spawn(self, coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run a background task of the operator: referenced until done, its failure logged,
        and cancelled when the operator stops (before kopf, see :func:`run`)."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def stop_background(self) -> None:
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def sync(self, key: Key) -> Result | None:
        # Once the coexistence guard has stopped writes, keys are dropped: the restart that
        # follows the fix lists everything again.
        if self.client.fence.reason:
            return None
        result: Result | None = await self.controller.sync(key)
        return result


KOPF_GROUPS = frozenset({PROJECT_GROUP})
"""The project's own API groups: their kinds are watched by kopf; every other kind, by the
runtime's informer (:mod:`.informer`)."""


@dataclass(frozen=True)
class WatchedKind:
    group: str
    version: str
    plural: str
    upsert: Callable[[Any, Mapping[str, Any]], None]
    delete: Callable[[Any, Mapping[str, Any]], None]

    @property
    def by_kopf(self) -> bool:
        return self.group in KOPF_GROUPS

    @property
    def path(self) -> str:
        return ApiResource(self.group, self.version, self.plural).path()

    def ref(self, body: Mapping[str, Any]) -> str:
        meta = body.get("metadata") or {}
        ns = meta.get("namespace")
        return f"{self.plural} {ns + '/' if ns else ''}{meta.get('name')}"

    def apply(self, runtime: Runtime, body: Mapping[str, Any], deleted: bool = False) -> None:
        try:
            if not deleted:
                runtime.guard.observe(self.plural, body)
            (self.delete if deleted else self.upsert)(runtime.controller, body)
        except Exception:
            what = "the deletion of " if deleted else ""
            log.exception("could not process %s%s", what, self.ref(body), extra={"object": self.ref(body)})


def watched_kinds(watches: Sequence[Watch[Any]], runtime: Runtime) -> list[WatchedKind]:
    """The kinds to watch, once the controller is prepared: each version decided."""
    kinds: list[WatchedKind] = []
    for watch in watches:
        if watch.when is not None and not watch.when(runtime.controller):
            continue
        version = watch.version
        if watch.versions:
            served = runtime.served_resource(watch.group, watch.plural)
            if served is None:
                log.warning(
                    "no version of %s serves %s (asked for %s): not watched; asking again every %.0fs",
                    watch.group or "core",
                    watch.plural,
                    ", ".join(watch.versions),
                    REDISCOVERY_SECONDS,
                )
                continue
            version = served.version
        kinds.append(WatchedKind(watch.group, version, watch.plural, watch.upsert, watch.delete))
    return kinds


def followed_watches(kinds: Sequence[Kind], runtime: Runtime) -> list[Kind]:
    """The kinds whose served version is followed: those named with several versions (every
    Discovered kind), but not those the controller declined, whatever the cluster serves."""
    return [k for k in kinds if k.versions and (k.when is None or k.when(runtime.controller))]


async def follow_served_version(runtime: Runtime, watch: Kind) -> None:
    """Stop the process (for a restart that watches or uses it) once another version of a
    discovered kind is served, or one is served at last."""
    served = runtime.served_resource(watch.group, watch.plural)
    watched = served.version if served else None
    seen = await served_version_change(
        runtime.reader, watch.group, watch.plural, watch.versions, watched, REDISCOVERY_SECONDS
    )
    log.warning(
        "the served version of %s/%s changed from %s to %s; stopping so that a restart watches it",
        watch.group or "core",
        watch.plural,
        watched or "none",
        seen or "none",
    )
    runtime.request_stop()


def _register_with_kopf(registry: kopf.OperatorRegistry, kind: WatchedKind) -> None:
    # A coroutine although it awaits nothing: kopf runs plain functions in a thread pool, while
    # the cache and the work queue may only be touched from the event loop.
    @kopf.on.event(
        kind.group,
        kind.version,
        kind.plural,
        registry=registry,
        id=f"watch-{kind.plural}.{kind.group or 'core'}",
    )
    async def _event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        event_type = event.get("type")
        watch_event(kind.plural, event_type)
        # The parsed JSON itself, not kopf's view of it: every read through the view costs a lookup.
        kind.apply(memo.runtime, event["object"], deleted=event_type == "DELETED")


LIST_PAGE_SIZE = 500
RELIST_DELAY_SECONDS = 5.0
KOPF_STOP_SECONDS = 10
EVENT_DRAIN_SECONDS = 2.0
KOPF_WORKER_LINGER_SECONDS = 0.2
KOPF_WORKER_LIMIT = 500


async def _pages(
    client: KubeClient, kind: WatchedKind, metadata_only: bool = False
) -> AsyncIterator[list[dict[str, Any]]]:
    """Every object of a kind, one page at a time, so that no more than a page is held in memory
    (a full list of thousands of objects briefly costs tens of MiB that Python keeps); an
    unserved kind (e.g. a CRD not installed) has no pages."""
    get = client.list_metadata if metadata_only else client.get
    params = {"limit": str(LIST_PAGE_SIZE)}
    while True:
        try:
            page = await get(kind.path, **params)
        except ApiError as err:
            if err.not_found:
                log.warning("%s is not served; nothing to list", kind.path)
                return
            raise
        api_version, list_kind = page.get("apiVersion", ""), str(page.get("kind", ""))
        items: list[dict[str, Any]] = page.get("items") or []
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", list_kind.removesuffix("List"))
        yield items
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return
        params = {"limit": str(LIST_PAGE_SIZE), "continue": token}


def _informer(runtime: Runtime, kind: WatchedKind) -> Informer:
    def deliver(obj: Mapping[str, Any], deleted: bool) -> None:
        kind.apply(runtime, obj, deleted)

    return Informer(runtime.reader, kind.path, kind.plural, deliver, page_size=LIST_PAGE_SIZE)


async def _initial_listing(
    runtime: Runtime,
    kinds: Sequence[WatchedKind],
    informers: Mapping[WatchedKind, Informer] | None = None,
) -> dict[WatchedKind, dict[str, Any]]:
    """Feed every existing object to the cache, in the order the kinds were registered. The
    informers' kinds list through their informer (which watches on from that list); for kopf's
    kinds, returns the listed UIDs with tombstone bodies (see :func:`_forget_vanished`)."""
    listed: dict[WatchedKind, dict[str, Any]] = {}
    for kind in kinds:
        informer = (informers or {}).get(kind)
        if informer is not None:
            log.info("listed %d %s", await informer.list(), kind.path)
            continue
        listed[kind] = {}
        count = 0
        async for items in _pages(runtime.reader, kind):
            count += len(items)
            for item in items:
                kind.apply(runtime, item)
                uid = (item.get("metadata") or {}).get("uid")
                if uid:
                    listed[kind][uid] = tombstone(item)
        log.info("listed %d %s", count, kind.path)
    return listed


async def _forget_vanished(runtime: Runtime, listed: dict[WatchedKind, dict[str, Any]]) -> None:
    """Objects deleted after our listing but before kopf's never produce a DELETED event: find
    them by listing again once kopf is watching, and delete them from the cache."""
    await asyncio.sleep(RELIST_DELAY_SECONDS)
    for kind, before in listed.items():
        if not before:
            # Only listed objects can have vanished. Skipping the kind also keeps a start in an
            # empty cluster from listing, a few seconds later, whatever burst has begun by then.
            continue
        while True:
            try:
                now = {
                    (item.get("metadata") or {}).get("uid")
                    async for items in _pages(runtime.reader, kind, metadata_only=True)
                    for item in items
                }
                break
            except ApiError as err:
                log.warning("re-listing %s failed, retrying: %s", kind.path, err)
                await asyncio.sleep(RELIST_DELAY_SECONDS)
        for uid, gone in before.items():
            if uid not in now:
                log.info("%s vanished before the watch started", kind.ref(gone))
                kind.apply(runtime, gone, deleted=True)
    listed.clear()


def _install_login(registry: kopf.OperatorRegistry) -> None:
    """kopf connects with the same credentials as our client: resolved once, by
    :func:`~.credentials.locate_credentials`, not again by kopf's own lookup."""

    @kopf.on.login(registry=registry)
    async def _login(memo: kopf.Memo, **_: Any) -> kopf.ConnectionInfo:
        runtime: Runtime = memo.runtime
        cfg = runtime.client.configuration
        auth: dict[str, Any] = await cfg.auth_settings() or {}
        header = str(auth.get("BearerToken", {}).get("value", ""))
        scheme, _sep, credential = header.partition(" ")
        return kopf.ConnectionInfo(
            server=str(cfg.host),
            ca_path=cfg.ssl_ca_cert,
            insecure=not cfg.verify_ssl,
            certificate_path=cfg.cert_file,
            private_key_path=cfg.key_file,
            scheme=scheme or None,
            token=credential or None,
            default_namespace=runtime.settings.namespace,
        )


class _NoDiffBase(kopf.DiffBaseStorage):
    """Only ``@kopf.on.event`` handlers are registered, so kopf needs no "last handled" state.
    Its default storage would deep-copy every object on every event to compute an essence that
    no handler reads, and it would keep that state in annotations of objects we do not own."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return {}

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        # The same empty essence as build(): kopf then finds no difference to compute per event.
        return {}

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class _NoProgress(kopf.ProgressStorage):
    """No handler of ours has progress to remember (see :class:`_NoDiffBase`)."""

    def fetch(self, *, key: Any, body: kopf.Body) -> kopf.ProgressRecord | None:
        return None

    def store(self, *, key: Any, record: kopf.ProgressRecord, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def purge(self, *, key: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence


def kopf_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.diffbase_storage = _NoDiffBase()
    settings.persistence.progress_storage = _NoProgress()
    # No namespace or CRD scanning: no RBAC for them, and the watched set is fixed.
    settings.scanning.disabled = True
    # Our Events come from EventRecorder, with our reporting component and de-duplication.
    settings.posting.enabled = False
    settings.watching.connect_timeout = 10
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.reconnect_backoff = 1.0
    # kopf's own listing (before its watch) in pages, as ours: one LIST of 5000 claims blocked the
    # event loop for ~0.3 s while it was parsed, visible as the p99 of poolstatus requests.
    settings.watching.chunk_size = LIST_PAGE_SIZE
    # kopf runs one worker task per object, which lingers 5 s after its last event. A burst of
    # events (kube-scheduler updating 5000 pods) then holds thousands of tasks and unparsed
    # bodies at once. Our handlers only copy fields into the cache: a short linger and a bound
    # on workers (the watcher waits for a free one) keep memory flat under bursts.
    settings.queueing.idle_timeout = KOPF_WORKER_LINGER_SECONDS
    settings.queueing.worker_limit = KOPF_WORKER_LIMIT
    settings.networking.request_timeout = 60
    return settings


async def _until_prepared(runtime: Runtime, stop: asyncio.Event) -> bool:
    while not stop.is_set():
        try:
            if await runtime.prepare():
                return True
        except ApiError as err:
            log.warning("start checks failed: %s; checking again in %.0fs", err, DISCOVERY_RETRY_SECONDS)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), DISCOVERY_RETRY_SECONDS)
    return False


async def _server_refusal(runtime: Runtime, stop: asyncio.Event) -> str | None:
    """Why the API server's Kubernetes is not supported, or None. Asked until it answers (or the
    process is stopped); an answer that does not tell (a 403, say) refuses nothing."""
    while not stop.is_set():
        try:
            document = await runtime.reader.get("/version")
        except ApiError as err:
            if not err.retryable:
                log.warning("cannot read the Kubernetes version (%s); going on without checking it", err)
                return None
            log.warning(
                "cannot read the Kubernetes version yet (%s); asking again in %.0fs",
                err,
                VERSION_RETRY_SECONDS,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), VERSION_RETRY_SECONDS)
            continue
        return serverversion.refusal(document if isinstance(document, Mapping) else {})
    return None


async def _ping(runtime: Runtime) -> None:
    """Keep /healthz honest when the operator has nothing to do: an idle process still needs
    to know whether it can reach kube-apiserver."""
    while True:
        await asyncio.sleep(API_PING_SECONDS)
        with contextlib.suppress(ApiError):
            await runtime.reader.get("/version")


def namespace_purpose(definition: OperatorDefinition, settings: OperatorSettings) -> str:
    """What the operator keeps in its namespace; empty when it needs none."""
    uses = [definition.namespace_use] if definition.namespace_use else []
    if settings.leader_elect:
        uses.append("the leader-election Lease")
    return " and ".join(uses)


async def _watch_namespace(state: NamespaceState, client: KubeClient, health: Health) -> None:
    """Re-check every few seconds, also once present (a deleted namespace is noticed), until
    the answer can no longer change (forbidden to read it)."""
    while state.presence is not namespace_check.Presence.UNKNOWABLE:
        await asyncio.sleep(namespace_check.CHECK_SECONDS)
        if state.update(await namespace_check.ask(client, state.name)):
            health.set_gate("namespace", state.presence.usable)


async def _lead(
    settings: OperatorSettings,
    client: KubeClient,
    lease_name: str,
    acquired: asyncio.Event,
    lost: asyncio.Event,
    fence: WriteFence,
) -> None:
    """Compete for the Lease: ``acquired`` is set once it is held, ``lost`` once the election has
    ended, and ``fence`` (the controller's writes) is closed just before. The run hears of the loss
    only when it next waits for it, and may still be starting, its workers about to take their
    first keys: none of their writes may reach the API server once a standby can lead."""
    from kubernetes_asyncio.leaderelection import electionconfig
    from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

    from .election import Elector

    async def started() -> None:
        acquired.set()
        await asyncio.Event().wait()

    def stop_leading() -> None:
        fence.close("the Lease is lost")
        lost.set()

    async def stopped() -> None:
        stop_leading()

    lock = LeaseLock(lease_name, settings.namespace, settings.identity, client.api)
    # The library writes leaseDurationSeconds with int(str(value)): whole seconds only.
    config = electionconfig.Config(
        lock,
        round(settings.leader_elect_lease_duration),
        round(settings.leader_elect_renew_deadline),
        round(settings.leader_elect_retry_period),
        started,
        stopped,
    )
    try:
        await Elector(config).run()
    except Exception:
        log.exception("leader election failed")
    finally:
        stop_leading()


async def run(
    definition: OperatorDefinition,
    settings: OperatorSettings,
    *,
    stop: asyncio.Event | None = None,
    configure_logging: bool = True,
    started: datetime | None = None,
) -> int:
    """Run until SIGTERM/SIGINT or ``stop`` (exit 0), or loss of the Lease (:data:`LEASE_LOST`).

    ``stop`` and ``configure_logging=False`` serve in-process runs (tests), where the caller
    owns logging and signals. ``started`` is when the process started (default: now), for the
    coexistence guard.
    """
    if configure_logging:
        logs.setup(settings.log_level, settings.log_format)
    health = Health(api_unreachable_timeout=settings.api_unreachable_timeout)
    # First, so that a configuration error is the only thing the process prints.
    client = await KubeClient.from_kubeconfig(
        settings.kubeconfig,
        qps=settings.kube_api_qps,
        burst=settings.kube_api_burst,
        user_agent=f"{definition.component_name}/{settings.identity}",
        on_success=health.api_ok,
    )
    health.set_gate(APIS_SERVED, False)
    health.set_gate("initial-listing", False)
    health.set_gate("leader", not settings.leader_elect)
    leading(definition.name, not settings.leader_elect)
    try:
        secure = None
        if settings.metrics_secure:
            # Reviews are POSTs: a client of their own, which the coexistence guard does not stop.
            reviewer = MetricsAuthorizer(client.sibling(own_fence=True))
            secure = health_server.SecureMetrics(reviewer, metricsauth.tls_context(settings.metrics_cert_dir))
        runners = await health_server.serve(
            health, settings.metrics_bind_address, settings.health_probe_bind_address, secure
        )
    except BaseException:
        await client.close()
        raise
    stop = stop or asyncio.Event()
    lost = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        log.info("stop requested; finishing running syncs")
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal)

    queue: WorkQueue[Key] = WorkQueue(definition.name)
    runtime = Runtime(
        name=definition.name,
        settings=settings,
        client=client,
        reader=client.sibling(),
        # Events and the Lease go on when the coexistence guard stops the controller's writes; and
        # Events go on once stopping, so that the Events of the syncs that end in the grace period
        # are posted, and the recorder's drain at exit has a client that sends.
        events=EventRecorder(
            client.sibling(outlives_stop=True, own_fence=True), definition.component_name, settings.identity
        ),
        health=health,
        queue=queue,
        field_manager=definition.component_name,
        kinds=definition.kinds,
        _stop=stop,
    )
    if definition.in_tree is not None:
        in_tree_controller(definition.in_tree.name, False)
        runtime.guard = Guard(
            definition.in_tree,
            # The process's start, not this run's: after a lost Lease the next run must still
            # count what the in-tree controller wrote before, or its verdict would be forgotten
            # and the fence reopened without the restart the verdict asks for.
            started or datetime.now(UTC),
            lambda evidence: _in_tree_controller_acts(runtime, evidence),
            suspect=None if definition.ask_in_tree is None else lambda _: _ask_again(runtime, definition),
        )
    tasks: list[asyncio.Task[Any]] = []
    exit_code = 0
    is_leader = False
    lead_task: asyncio.Task[Any] | None = None
    # A standby replica must stay live too: it pings the API server while it waits for the Lease.
    tasks.append(asyncio.create_task(_ping(runtime)))
    try:
        refusal = await _server_refusal(runtime, stop)
        if stop.is_set():
            return 0
        if refusal is not None:
            # Before the Lease and the namespace: a standby refuses as well, and competes for nothing.
            log.error("%s", refusal)
            health.refuse(refusal)
            await stop.wait()
            return 0
        purpose = namespace_purpose(definition, settings)
        if purpose:
            state = runtime.own_namespace = NamespaceState(settings.namespace, purpose)
            # Asked once before anything else, so that no condition is ever written before the
            # answer is known; then the loop keeps it current.
            state.update(await namespace_check.ask(runtime.reader, state.name))
            health.set_gate("namespace", state.presence.usable)
            tasks.append(asyncio.create_task(_watch_namespace(state, runtime.reader, health)))
            if settings.leader_elect and not state.presence.usable:
                # The Lease lives in the namespace: competing for it before would only fail.
                await _first(state.wait_usable(), stop.wait())
                if stop.is_set():
                    return 0
        asking: asyncio.Task[Evidence | None] | None = None
        if definition.in_tree is not None and definition.ask_in_tree is not None:
            # Asked at start, while a standby still waits for the Lease: a hand-over then costs no
            # more than the Lease's expiry. What changes later, the guard sees in what it watches.
            asking = asyncio.create_task(
                definition.ask_in_tree(runtime, definition.in_tree), name="ask-in-tree"
            )
            tasks.append(asking)
        if settings.leader_elect:
            acquired = asyncio.Event()
            lead_task = asyncio.create_task(
                _lead(
                    settings,
                    client.sibling(own_fence=True),
                    definition.component_name,
                    acquired,
                    lost,
                    client.fence,
                )
            )
            tasks.append(lead_task)
            await _first(acquired.wait(), stop.wait(), lost.wait())
            if not acquired.is_set():
                return LEASE_LOST if lost.is_set() else 0
            log.info(
                "acquired the Lease %s/%s as %s",
                settings.namespace,
                definition.component_name,
                settings.identity,
            )
            health.set_gate("leader", True)
            leading(definition.name, True)
            is_leader = True
        runtime.controller = definition.make_controller(runtime)
        if not await _until_prepared(runtime, stop):
            return runtime.exit_code
        if asking is not None:
            # Before the first write: the guard must not learn of the in-tree controller from a
            # pod both of them acted on.
            evidence = await asking
            if evidence is not None:
                runtime.guard.found(evidence)
        kinds = watched_kinds(definition.watches, runtime)
        for followed in followed_watches(definition.kinds, runtime):
            runtime.spawn(follow_served_version(runtime, followed), f"follow-{followed.plural}")
        informers = {kind: _informer(runtime, kind) for kind in kinds if not kind.by_kopf}
        listed = await _initial_listing(runtime, kinds, informers)
        runtime.listed()
        for kind, informer in informers.items():
            tasks.append(asyncio.create_task(informer.run(), name=f"informer-{kind.plural}"))
        kopf_stop: asyncio.Future[None] = loop.create_future()
        operator: asyncio.Task[None] | None = None
        if any(kind.by_kopf for kind in kinds):
            # A registry per run: nothing of one run (an in-process test) is seen by the next.
            registry = kopf.OperatorRegistry()
            _install_login(registry)
            for kind in kinds:
                if kind.by_kopf:
                    _register_with_kopf(registry, kind)
            kopf_ready: asyncio.Future[None] = loop.create_future()
            operator = asyncio.create_task(
                kopf.operator(
                    registry=registry,
                    settings=kopf_settings(),
                    standalone=True,
                    clusterwide=True,
                    memo=kopf.Memo(runtime=runtime),
                    stop_flag=kopf_stop,
                    ready_flag=kopf_ready,
                )
            )
            await _first(kopf_ready, operator, keep=[operator])
            # kopf installs its own signal handlers; ours decide how the process stops.
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, on_signal)
        workers = settings.workers or definition.default_workers
        tasks.append(asyncio.create_task(queue.run(workers, runtime.sync), name="workers"))
        forget: asyncio.Task[None] | None = None
        if any(listed.values()):
            forget = asyncio.create_task(_forget_vanished(runtime, listed), name="forget-vanished")
            tasks.append(forget)
        kopf_running = [operator] if operator is not None else []
        await _first(stop.wait(), lost.wait(), *kopf_running, keep=kopf_running)
        if lost.is_set():
            log.error(
                "lost the Lease %s/%s; stopping every write, to start over as a standby",
                settings.namespace,
                definition.component_name,
            )
            exit_code = LEASE_LOST
        elif operator is not None and operator.done():
            log.error("the watch machinery stopped unexpectedly: %r", operator.exception())
            exit_code = 1
        else:
            exit_code = runtime.exit_code
        client.stop_waiting()
        finished = await queue.shutdown(0 if exit_code else settings.shutdown_grace_period)
        # kopf, stopping, waits up to 5 s for every task started after it and then cancels them:
        # ours end first, so kopf stops at once and closes its sessions itself.
        await _stop_task(forget)
        await runtime.stop_background()
        if not kopf_stop.done():
            kopf_stop.set_result(None)
        if operator is not None:
            try:
                await asyncio.wait_for(operator, KOPF_STOP_SECONDS)
            except TimeoutError:
                log.warning("kopf did not stop within %d s; cancelled", KOPF_STOP_SECONDS)
            except (Exception, asyncio.CancelledError):
                pass
        if is_leader and not lost.is_set() and not finished:
            # A sync past the grace period may still act (an attach call, a request in flight): the
            # Lease is renewed until the end and then expires, so that no standby acts beside it.
            log.warning(
                "syncs still running after the grace period; the Lease %s/%s expires instead of being "
                "released",
                settings.namespace,
                definition.component_name,
            )
        elif is_leader and not lost.is_set():
            # Nothing of ours writes any more: the standby may take over now, not in 15 s.
            await _stop_task(lead_task)
            # The main client refuses new requests once stopping; this one has a bucket of its own.
            releaser = client.sibling(outlives_stop=True, own_fence=True)
            await release_lease(releaser, settings.namespace, definition.component_name, settings.identity)
        await runtime.events.drain(EVENT_DRAIN_SECONDS)
        return exit_code
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await runtime.stop_background()
        await health_server.stop(runners)
        await client.close()


def _ask_again(runtime: Runtime, definition: OperatorDefinition) -> None:
    """A forgeable signature was seen (:attr:`.coexistence.Signature.forgeable`): the operator's own
    question, asked where tenants cannot write, decides."""
    in_tree, ask = definition.in_tree, definition.ask_in_tree
    assert in_tree is not None
    assert ask is not None

    async def question() -> None:
        evidence = await ask(runtime, in_tree)
        if evidence is not None:
            runtime.guard.found(evidence)
        else:
            log.info(
                "kube-controller-manager's %s did not answer: another client wrote the signature seen",
                in_tree.name,
            )

    runtime.spawn(question(), "ask-in-tree-again")


def _in_tree_controller_acts(runtime: Runtime, evidence: Evidence) -> None:
    """The coexistence guard's verdict (:mod:`.coexistence`): report it everywhere an
    administrator looks, and unless allowed, stop writing and stop being ready."""
    settings = runtime.settings
    allowed = isinstance(settings, InTreeReplacementSettings) and settings.allow_in_tree_controller
    message = evidence.message(allowed)
    in_tree_controller(evidence.controller.name, True)
    where = ObjectRef(evidence.api_version, evidence.kind, evidence.name, evidence.namespace, evidence.uid)
    runtime.events.record(where, "Warning", "InTreeControllerDetected", message)
    if allowed:
        log.warning(message)
        return
    log.error(message)
    acts = f"kube-controller-manager's {evidence.controller.name} acts on the same objects"
    runtime.client.fence.close(acts)
    runtime.health.refuse(f"in-tree controller: {acts} ({evidence.object}); {evidence.controller.remedy}")


async def _stop_task(task: asyncio.Task[Any] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await task


async def release_lease(client: KubeClient, namespace: str, name: str, identity: str) -> None:
    """On a clean stop, hand the Lease over at once instead of after its 15 s, as client-go's
    ReleaseOnCancel does: no holder, and a duration of one second. Only while it still names us
    (the replace carries the read resourceVersion)."""
    path = LEASES.path(name, namespace=namespace)
    try:
        lease = await client.get(path)
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != identity:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        released = {
            **spec,
            "holderIdentity": None,
            "leaseDurationSeconds": 1,
            "renewTime": now,
            "acquireTime": now,
        }
        await client.replace(path, {**lease, "spec": released})
        log.info("released the Lease %s/%s", namespace, name)
    except ApiError as err:
        log.warning("could not release the Lease %s/%s: %s", namespace, name, err)


async def _first(*awaitables: Any, keep: Sequence[asyncio.Future[Any]] = ()) -> None:
    """Wait until one finishes; cancel the waiters made here, never the ones in ``keep``."""
    futures = [a if isinstance(a, asyncio.Future) else asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            if future not in keep and not future.done():
                future.cancel()
