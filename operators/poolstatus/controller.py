"""The I/O layer of the pool-status operator: caches in, one status write out, TTL deletes.

Work items (all on the shared work queue, so nothing runs before the initial listing):

* ``Key("ResourcePoolStatusRequest.<group>", "", name)``: evaluate one pending request of the
  surface served in ``<group>`` and write its status once;
* :data:`TTL_KEY`: the TTL sweep, periodic work (``WorkQueue.every``) that runs when the queue
  opens, then every ``cleanupInterval`` after the previous sweep;
* :data:`DISCOVERY_KEY`: ask the runtime every ``discoveryInterval`` (the first time one
  interval after start) what is served now (:meth:`~operators.core.runtime.Runtime.ask_served`);
  a change of what should be served ends the process with status 3 so that its Deployment
  restarts it with watches that match (kopf sets its watches up once). This is not the
  runtime's follower of served versions (``follow_served_version``), which compares versions
  only, of the kinds with ``versions`` the operator still wants, every 60 s, and stops with
  status 0 after a second sighting: availability here also means the status subresource, a
  surface not served at start is followed too (``auto``), and ``--discovery-interval`` and
  status 3 are documented options.

Concurrency contract: watch callbacks and the evaluation run on one event loop. An
evaluation reads the caches (mostly answers they kept per pool) and computes without
awaiting, so the caches cannot change under it (spec section 6.4); only the write awaits.
Per-request bookkeeping (when it was first seen, write attempts) lives in process memory
keyed by uid: after a restart the grace period starts again, which the spec accepts.
``_answered`` remembers the uids this process wrote until the watch shows their status, so
a slice event in between cannot trigger a second write that would then be mistaken for
another writer's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from operators.core.client import Answer, ApiError
from operators.core.conditions import parse_time
from operators.core.discovery import ServedResource
from operators.core.events import WARNING, ObjectRef
from operators.core.keys import CLAIM, Key
from operators.core.models import body_metadata, body_name, parse_or_skip
from operators.core.plan import Plan, Write, execute
from operators.core.reconcile import Done, Requeue, Result
from operators.core.runtime import Runtime
from operators.dra import api, taintrules

from . import messages, plans, surfaces, writes
from . import metrics as m
from .cache import ClusterCache, RequestEntry, RequestKey
from .models import DeviceTaintRule, ResourceClaim, ResourcePoolStatusRequest, ResourceSlice
from .settings import Settings
from .status import Completed, Deferred, Evaluation, decide, failed_status
from .surfaces import Surface
from .ttl import ttl_action

log = logging.getLogger(__name__)

TTL_KEY = Key.periodic("ttl")
DISCOVERY_KEY = Key.periodic("discovery")
REQUEST = "ResourcePoolStatusRequest"
"""The kind of request keys, qualified by the surface's API group: ``ResourcePoolStatusRequest.<group>``."""
# Slice events re-evaluate waiting requests at most this often (spec section 7.1).
SLICE_REQUEUE_SECONDS = 0.5


def _name_and_uid(body: Mapping[str, Any]) -> tuple[str, str]:
    return body_name(body), str(body_metadata(body).get("uid") or "")


def _write_failed(rejection: str) -> Completed:
    """The Failed status that reports a rejected status write, timed now: each attempt is its write."""
    failed = failed_status(messages.write_failed_message(rejection), datetime.now(UTC))
    return Completed(failed, result="failed", pool_count=0, listed=0, incomplete=0, validation_prefixes=())


def request_key(request: RequestKey) -> Key:
    """The work key of a request: (surface group, name) from the cache."""
    group, name = request
    return Key(f"{REQUEST}.{group}", "", name)


class PoolStatusController:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = cast(Settings, runtime.settings)
        self.cache = ClusterCache()
        self.modes: dict[Surface, surfaces.Mode] = {
            surfaces.BUILTIN: self.settings.builtin_api,
            surfaces.PROJECT: self.settings.crd_api,
        }
        self.served: tuple[Surface, ...] = ()
        self.available: dict[Surface, bool] = {}
        self.rules_served = False
        self.rules_in_use = False
        self._first_seen: dict[str, float] = {}
        self._answered: set[str] = set()
        self._conflicts: dict[str, int] = {}
        self._transient: dict[str, int] = {}
        # uid -> the server's message on the rejected status, which the Failed status reports.
        self._rejected: dict[str, str] = {}
        # The (group, fields) the server dropped that were logged already: once per process.
        self._drops_logged: set[tuple[str, tuple[str, ...]]] = set()
        m.state.observe(self)

    # -- start-up and discovery -------------------------------------------------------------

    @staticmethod
    def _availability(
        served: Mapping[tuple[str, str], ServedResource | None],
    ) -> tuple[dict[Surface, bool], bool]:
        """Which surfaces can be served, and whether DeviceTaintRules are, by what the runtime
        found of the watched kinds (each surface's request watch, the rule watch)."""
        availability = {s: surfaces.available(served.get((s.group, s.plural))) for s in surfaces.SURFACES}
        # Any version will do: the rule watch reads the first one served (see .operator).
        return availability, served.get((api.GROUP, taintrules.PLURAL)) is not None

    async def prepare(self) -> bool:
        self.available, self.rules_served = self._availability(self.runtime.served)
        decision = surfaces.decide(self.modes, self.available)
        for surface in surfaces.SURFACES:
            m.api_surface_enabled.labels(group=surface.group).set(1 if surface in decision.served else 0)
        if decision.missing_required:
            names = ", ".join(s.api_version for s in decision.missing_required)
            log.error("required API surface not served: %s; exiting", names)
            self.runtime.request_stop(surfaces.EXIT_REQUIRED_SURFACE_MISSING)
            return False
        # The runtime watches the requests of these surfaces only (Watch.when, see .operator).
        self.served = decision.served
        mode = self.settings.device_taint_rules
        self.rules_in_use = mode == "on" or (mode == "auto" and self.rules_served)
        if not self.served:
            log.warning("no ResourcePoolStatusRequest API is served (built-in or CRD); not ready")
            return False
        log.info(
            "serving %s; DeviceTaintRules %s",
            ", ".join(s.api_version for s in self.served),
            "in use" if self.rules_in_use else "not in use",
        )
        self.runtime.queue.every(TTL_KEY, self.settings.cleanup_interval)
        interval = self.settings.discovery_interval
        self.runtime.queue.every(DISCOVERY_KEY, interval, first=interval)
        return True

    async def _recheck_discovery(self) -> None:
        availability, rules_served = self._availability(await self.runtime.ask_served())
        lines = surfaces.changes(self.modes, self.served, availability)
        if self.settings.device_taint_rules == "auto" and rules_served != self.rules_served:
            versions = ", ".join(taintrules.VERSIONS)
            lines.append(
                f"API resource {taintrules.PLURAL}.{api.GROUP} ({versions}) became "
                + ("available" if rules_served else "unavailable")
            )
        if lines:
            for line in lines:
                log.warning("%s; restarting to follow it", line)
            self.runtime.request_stop(surfaces.EXIT_AVAILABILITY_CHANGED)

    # -- watch callbacks (synchronous, no API calls) -----------------------------------------

    def upsert_slice(self, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata", {})
        name, version = meta.get("name", ""), meta.get("resourceVersion", "")
        if self.cache.slice_unchanged(name, version):
            return
        resource_slice = parse_or_skip(ResourceSlice, body, log)
        if resource_slice is not None:
            touched = self.cache.put_slice(resource_slice, version)
        else:
            touched = self.cache.remove_slice(name)
        self._requeue_waiting(touched)

    # A deletion may arrive as a tombstone (metadata only): each removes by key and UID, and
    # reads what it removes from the cache, never from the body.

    def delete_slice(self, body: Mapping[str, Any]) -> None:
        name, uid = _name_and_uid(body)
        self._requeue_waiting(self.cache.remove_slice(name, uid))

    def upsert_claim(self, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata", {})
        key, version = (
            Key(CLAIM, meta.get("namespace") or "", meta.get("name", "")),
            meta.get("resourceVersion", ""),
        )
        if self.cache.claim_unchanged(key, version):
            return
        status = body.get("status")
        if not isinstance(status, Mapping) or not status.get("allocation"):
            self.cache.remove_claim(key)  # unallocated: nothing that counts, nothing to parse
            return
        claim = parse_or_skip(ResourceClaim, body, log)
        if claim is not None:
            self.cache.put_claim(claim, version)
        else:
            self.cache.remove_claim(key)

    def delete_claim(self, body: Mapping[str, Any]) -> None:
        name, uid = _name_and_uid(body)
        self.cache.remove_claim(Key(CLAIM, str(body_metadata(body).get("namespace") or ""), name), uid)

    def upsert_rule(self, body: Mapping[str, Any]) -> None:
        name = body.get("metadata", {}).get("name", "")
        rule = parse_or_skip(DeviceTaintRule, body, log)
        if rule is not None:
            self.cache.put_rule(rule)
        else:
            self.cache.remove_rule(name)

    def delete_rule(self, body: Mapping[str, Any]) -> None:
        self.cache.remove_rule(*_name_and_uid(body))

    def upsert_request(self, surface: Surface, body: Mapping[str, Any]) -> None:
        if surface not in self.served:
            return
        request = parse_or_skip(ResourcePoolStatusRequest, body, log)
        if request is None:
            # Only possible if admission was bypassed; such a request is never answered.
            return
        entry = self.cache.put_request(surface, request)
        if entry.pending:
            if entry.uid not in self._answered:
                self.runtime.queue.add(request_key(entry.key))
        else:
            self._forget(entry.uid)

    def delete_request(self, surface: Surface, body: Mapping[str, Any]) -> None:
        name, uid = _name_and_uid(body)
        removed = self.cache.remove_request((surface.group, name), uid)
        # The deleted request's bookkeeping goes even when a newer request of its name is cached.
        self._forget(removed.uid if removed is not None else uid)

    def _requeue_waiting(self, drivers: set[str]) -> None:
        if not self._first_seen:
            return
        for driver in drivers:
            for entry in self.cache.pending_of_driver(driver):
                if entry.uid in self._first_seen:
                    self.runtime.queue.add_after(request_key(entry.key), SLICE_REQUEUE_SECONDS)

    def _forget(self, uid: str) -> None:
        self._first_seen.pop(uid, None)
        self._answered.discard(uid)
        self._conflicts.pop(uid, None)
        self._transient.pop(uid, None)
        self._rejected.pop(uid, None)

    # -- metrics sources ---------------------------------------------------------------------

    def pending_counts(self) -> Mapping[str, int]:
        return {s.group: self.cache.pending_count(s.group) for s in self.served}

    def cache_synced(self) -> Mapping[str, bool]:
        synced = self.runtime.queue.is_open
        resources = ["resourceslices", "resourceclaims", "requests"]
        if self.rules_in_use:
            resources.append(taintrules.PLURAL)
        return dict.fromkeys(resources, synced)

    # -- work items ----------------------------------------------------------------------------

    async def sync(self, key: Key) -> Result:
        kind, _, group = key.kind.partition(".")
        if kind == REQUEST:
            return await self._sync_request((group, key.name))
        if key == TTL_KEY:
            await self._sweep()
        elif key == DISCOVERY_KEY:
            await self._recheck_discovery()
        return Done()

    async def _sync_request(self, key: RequestKey) -> Result:
        entry = self.cache.requests.get(key)
        if entry is None or not entry.pending or entry.uid in self._answered:
            return Done("deleted or answered: a request is processed once")
        if entry.surface not in self.served:
            return Done()
        if (rejection := self._rejected.get(entry.uid)) is not None:
            # Recomputing would only meet the same rejection: a transient failure or a conflict
            # on the Failed status is retried with the Failed status.
            return await self._write(entry, _write_failed(rejection))
        group = entry.surface.group
        spec = entry.request.spec
        now = time.monotonic()
        first_seen = self._first_seen.setdefault(entry.uid, now)
        # From here to decide()'s return nothing awaits: one consistent view of the caches.
        with m.processing_duration.labels(group=group).time():
            try:
                evaluation = decide(
                    spec,
                    self.cache.pool_results(spec, self.rules_in_use),
                    now=now,
                    first_seen=first_seen,
                    written_at=datetime.now(UTC),
                    grace=self.settings.incomplete_grace_period,
                    max_status_bytes=self.settings.max_status_bytes,
                )
            except Exception:
                m.processing_errors.labels(group=group, stage="compute").inc()
                raise
        if isinstance(evaluation, Deferred):
            m.grace_requeues.labels(group=group).inc()
            return await execute(self._plan(entry, evaluation), self.runtime)
        return await self._write(entry, evaluation)

    @staticmethod
    def _plan(entry: RequestEntry, evaluation: Evaluation) -> Plan:
        meta = entry.request.metadata
        path = entry.surface.path(meta.name, subresource="status")
        return plans.request_plan(path, meta.resource_version, evaluation)

    # -- status writes ---------------------------------------------------------------------------

    async def _write(self, entry: RequestEntry, result: Completed) -> Result:
        replies: list[object] = []

        def replied(_: Write, reply: object) -> None:
            replies.append(reply)

        try:
            done = await execute(self._plan(entry, result), self.runtime, replied=replied)
        except ApiError as err:
            answer = err.answer
            if answer is Answer.GONE:
                self._forget(entry.uid)
                return Done()
            if answer is Answer.CONFLICT:
                return await self._on_conflict(entry)
            if answer is Answer.INVALID:
                return await self._on_rejected(entry, err)
            m.processing_errors.labels(group=entry.surface.group, stage="write").inc()
            if answer is Answer.REFUSED:
                return self._on_refused(entry, err)
            attempt = self._transient.get(entry.uid, 0)
            self._transient[entry.uid] = attempt + 1
            # The request's own backoff (writes.TRANSIENT_BACKOFF), not the queue's: it resets per request.
            return Requeue(writes.TRANSIENT_BACKOFF.delay(attempt), f"status write failed: {err}")
        self._record(entry, result)
        self._report_dropped(entry, result.status, replies[0] if replies else None)
        return done

    def _report_dropped(self, entry: RequestEntry, written: Mapping[str, Any], answer: object) -> None:
        """Say once which written fields the server did not keep. Nothing is written again: the
        request counts as answered, so what the watch then shows is never compared with this."""
        returned = answer.get("status") if isinstance(answer, Mapping) else None
        dropped = writes.dropped_fields(written, returned)
        if not dropped:
            return
        surface, name = entry.surface, entry.request.metadata.name
        message = messages.status_fields_dropped_message(
            surface.api_version, dropped, built_in=surface == surfaces.BUILTIN
        )
        for field in dropped:
            m.status_fields_dropped.labels(group=surface.group, field=field).inc()
        ref = ObjectRef(surface.api_version, messages.REQUEST_KIND, name, None, entry.uid)
        self.runtime.events.record(ref, WARNING, messages.REASON_STATUS_FIELDS_DROPPED, message)
        if (surface.group, dropped) in self._drops_logged:
            return
        self._drops_logged.add((surface.group, dropped))
        log.warning(
            "%s %s: %s (logged once per process; every such request gets a Warning Event %s)",
            surface.group,
            name,
            message,
            messages.REASON_STATUS_FIELDS_DROPPED,
            extra={"object": name},
        )

    async def _read(self, entry: RequestEntry) -> dict[str, Any] | None:
        try:
            current: dict[str, Any] = await self.runtime.client.get(
                entry.surface.path(entry.request.metadata.name)
            )
        except ApiError as err:
            if err.not_found:
                return None
            raise
        if current.get("metadata", {}).get("uid") != entry.uid:
            return None  # the name now belongs to a new request, which has its own work item
        return current

    def _lost_race(self, entry: RequestEntry) -> None:
        m.status_write_conflicts.labels(group=entry.surface.group, outcome="other_writer").inc()
        log.warning(
            "another writer answered %s %s first; leaving its status",
            entry.surface.group,
            entry.request.metadata.name,
            extra={"object": entry.request.metadata.name},
        )
        self._answered.add(entry.uid)

    async def _unanswered(self, entry: RequestEntry) -> dict[str, Any] | None:
        """The request as it is now, after a refused write; None where nothing is left to write:
        it is gone, or another writer answered it."""
        current = await self._read(entry)
        cached = self.cache.requests.get(entry.key)
        if current is None or cached is None or cached.uid != entry.uid:
            # A deletion the watch delivered while the read was on its way is newer than the
            # copy read: putting that copy back in the cache would keep the request for good.
            self._forget(entry.uid)
            return None
        if current.get("status"):
            self._lost_race(entry)
            return None
        return current

    async def _on_conflict(self, entry: RequestEntry) -> Result:
        if (current := await self._unanswered(entry)) is None:
            return Done()
        conflicts = self._conflicts.get(entry.uid, 0) + 1
        self._conflicts[entry.uid] = conflicts
        m.status_write_conflicts.labels(group=entry.surface.group, outcome="retried").inc()
        # Only metadata can have moved (the spec is immutable): continue from the fresh copy.
        self.cache.put_request(entry.surface, ResourcePoolStatusRequest.model_validate(current))
        over = conflicts - writes.MAX_CONFLICT_RETRIES
        delay = 0.0 if over < 0 else writes.TRANSIENT_BACKOFF.delay(over)
        return Requeue(delay, "the request changed since it was read")

    async def _on_rejected(self, entry: RequestEntry, err: ApiError) -> Result:
        name = entry.request.metadata.name
        if (current := await self._unanswered(entry)) is None:
            return Done()
        if entry.uid in self._rejected:
            log.error(
                "the API server rejected even the Failed status of %s %s: %s; giving up",
                entry.surface.group,
                name,
                err.message,
                extra={"object": name},
            )
            self._answered.add(entry.uid)
            return Done()
        self._rejected[entry.uid] = err.message
        m.status_rejected.labels(group=entry.surface.group, reason=writes.rejection_reason(err.status)).inc()
        log.warning("the API server rejected the status of %s %s: %s", entry.surface.group, name, err.message)
        fresh = self.cache.put_request(entry.surface, ResourcePoolStatusRequest.model_validate(current))
        return await self._write(fresh, _write_failed(err.message))

    def _on_refused(self, entry: RequestEntry, err: ApiError) -> Result:
        name = entry.request.metadata.name
        log.error(
            "the API server refused to let the operator write the status of %s %s: %s; it stays "
            "pending until the request changes, the operator restarts, or its pending TTL ends",
            entry.surface.group,
            name,
            err,
            extra={"object": name},
        )
        # Not answered: an event of the request, or a restart, evaluates it again.
        self._forget(entry.uid)
        return Done("status write refused")

    def _record(self, entry: RequestEntry, result: Completed) -> None:
        group = entry.surface.group
        name = entry.request.metadata.name
        self._forget(entry.uid)
        self._answered.add(entry.uid)
        m.requests_processed.labels(group=group, result=result.result).inc()
        created = entry.request.metadata.creation_timestamp
        if created:
            latency = (datetime.now(UTC) - parse_time(created)).total_seconds()
            m.completion_latency.labels(group=group, result=result.result).observe(max(latency, 0.0))
        if result.too_large:
            m.status_rejected.labels(group=group, reason="too_large").inc()
        if result.result == "complete":
            m.pools_counted.labels(group=group).observe(result.pool_count)
            for prefix in result.validation_prefixes:
                m.pool_validation_errors.labels(group=group, prefix=prefix).inc()
            log.info(
                "wrote the status of %s %s: poolCount=%d listed=%d incomplete=%d",
                group,
                name,
                result.pool_count,
                result.listed,
                result.incomplete,
                extra={"object": name},
            )
        else:
            message = result.status["conditions"][0]["message"]
            log.warning("wrote a Failed status to %s %s: %s", group, name, message, extra={"object": name})

    # -- TTL ---------------------------------------------------------------------------------

    async def _sweep(self) -> None:
        started = time.perf_counter()
        now = datetime.now(UTC)
        completed_ttl = timedelta(seconds=self.settings.completed_ttl)
        pending_ttl = timedelta(seconds=self.settings.pending_ttl)
        for entry in list(self.cache.requests.values()):
            if entry.surface not in self.served:
                continue
            # One request the sweep cannot handle must not keep every other from expiring.
            try:
                decision = ttl_action(entry.request, now, completed_ttl, pending_ttl)
                if decision.delete:
                    await self._delete_expired(entry, decision.state)
            except Exception as err:
                group, name = entry.surface.group, entry.request.metadata.name
                log.warning(
                    "TTL check of %s %s failed, skipped: %r", group, name, err, extra={"object": name}
                )
        m.cleanup_duration.observe(time.perf_counter() - started)

    async def _delete_expired(self, entry: RequestEntry, state: str) -> None:
        group = entry.surface.group
        name = entry.request.metadata.name
        plan = plans.expiry_plan(entry.surface.path(name), entry.uid)
        try:
            result = await execute(plan, self.runtime)
        except ApiError as err:
            m.ttl_deletion_errors.labels(group=group).inc()
            log.warning("TTL deletion of %s %s failed: %s", group, name, err, extra={"object": name})
            return
        if result != plan.result:
            return  # gone already, or the name is a new request's: nothing was deleted
        m.ttl_deletions.labels(group=group, state=state).inc()
        log.info("deleted %s request %s %s after its TTL", state, group, name, extra={"object": name})
