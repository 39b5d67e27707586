"""The attacher's API layer: every read and write of a claim sync goes through here.

:class:`StatusWriter` applies one driver's ``status.devices`` entries on a claim with
server-side apply (spec §11.1, §11.3), as the plan :func:`.devicestatus.status_plan` describes.
One field manager per driver (``devicestatus.field_manager``) owns exactly that driver's
entries, so other drivers' entries and other writers' fields are never touched, and the body's
``metadata.uid``/``resourceVersion`` make the apply a compare-and-set on the claim version the
decision was taken on. The answer is the new claim; it goes straight into the cache. A rejection
is raised as :class:`StatusWriteError`, classified the way §11.3 handles it.

:class:`LedgerWriter` carries out the ``DeviceAttachment`` record writes that :mod:`.ledger`
plans (spec §8, §13.2). Every answer of the API server is put into the ledger index at once, so
the next decision never waits for the watch. A plan that ends because the record was stale
re-reads the record and answers the plan's :class:`~operators.core.reconcile.Requeue`, which
the claim sync returns.

All of these writes are :class:`~operators.core.plan.Plan` steps carried out by
:func:`operators.core.plan.execute`; this layer adds only what the attacher keeps of the
answers (its caches, the status-write metrics, the classification of a refusal).

:class:`Lookups` reads the objects the attacher does not watch (spec §6, §15.3). Pods and Nodes
are not watched: a cluster-wide pod watch is the largest memory cost of a DRA controller, and
the attacher needs only the few pods named in a claim's ``reservedFor``. Pods are read when a
decision depends on them (node fallback, "is a consumer bound"), with a one second memo that
collapses the reads of one burst of syncs; Nodes are read for the action request with a 60 s
TTL.

Device details for actions come from one list of the driver's ResourceSlices with
``fieldSelector=spec.driver=<driver>`` (a field the API server indexes), memoized for a few
seconds, instead of a permanent watch per driver: actions read them only when a call starts.

:class:`TaintRules` keeps a failed device from being picked again (spec §14,
``onFailure.taintDevice``). KEP-5007 asks whoever reports a binding failure to make sure the
scheduler does not choose the same broken device again at once. The attacher does that with a
``NoSchedule`` DeviceTaintRule per device, named after the device key, labelled with the policy
and annotated with an expiry; the garbage-collection sweep deletes rules whose expiry passed.

:class:`InventoryMirror` mirrors the Test action's fake backend inventory into a ConfigMap (spec
§10.7). The Test action calls its listener synchronously after every change; the mirror keeps
only the newest content per ConfigMap and writes it with server-side apply, one write in flight
per ConfigMap: changes that arrive during a write are coalesced into the next one. Several
policies may name the same ConfigMap: each publishes its own part (its own attachment keys), and
the mirror writes their union, because every apply carries the whole ``data`` of our field
manager and would otherwise remove the other policy's keys.

The mirror is what lets a test see calls made by a process it then kills, and what a restarted
process loads back (:meth:`InventoryMirror.load`), so the counters survive restarts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import ValidationError

from operators.core.client import ApiError, KubeClient
from operators.core.conditions import format_time, parse_time, time_after
from operators.core.discovery import ServedResource
from operators.core.models import parse_or_skip
from operators.core.names import is_dns_subdomain, label_value_of
from operators.core.plan import Apply, Create, Delete, Plan, Writer, execute
from operators.core.reconcile import Requeue, Result
from operators.core.resources import CONFIG_MAPS, NODES, PODS
from operators.dra import taintrules
from operators.dra.api import RESOURCE_CLAIMS, RESOURCE_SLICES
from operators.dra.attachments import LABEL_POLICY
from operators.dra.pools import DeviceId, published_device

from . import ledger, metrics
from .cache import ClusterCache, put_record
from .devicestatus import WriteError, classify_write_error, status_plan
from .identity import taint_rule_name
from .ledger import LedgerIndex
from .models import (
    ActionDevice,
    ConsumerReference,
    DeviceAttachment,
    Node,
    Pod,
    ResourceClaim,
    ResourceSlice,
)

if TYPE_CHECKING:
    from operators.core.runtime import Spawn


class StatusWriteError(Exception):
    def __init__(self, kind: WriteError, error: ApiError) -> None:
        super().__init__(f"{kind.value}: {error}")
        self.kind = kind
        self.error = error


def write_kind(entries: Sequence[Mapping[str, Any]], failure_types: frozenset[str]) -> str:
    """The ``kind`` label of ``claim_status_writes_total``: failure, ready or progress."""
    true = {c["type"] for e in entries for c in e["conditions"] if c["status"] == "True"}
    if true & failure_types:
        return "failure"
    return "ready" if true else "progress"


async def _carry_out(plan: Plan, writer: Writer) -> tuple[Result, Any]:
    """The plan's Result and the last reply of a write answered 2xx (None if there was none)."""
    replies: list[Any] = []
    result = await execute(plan, writer, replied=lambda _, reply: replies.append(reply))
    return result, replies[-1] if replies else None


class StatusWriter:
    """Every claim it reads or writes goes into the claim cache, projected as the watch projects it
    (the drivers configured now decide which entries are kept)."""

    def __init__(
        self, writer: Writer, reader: KubeClient, cache: ClusterCache, keep_test_annotations: bool
    ) -> None:
        self.writer = writer
        self.reader = reader
        self.cache = cache
        self.keep_test_annotations = keep_test_annotations

    async def apply(
        self, claim: ResourceClaim, driver: str, entries: Sequence[Mapping[str, Any]], kind: str
    ) -> ResourceClaim:
        started = time.monotonic()
        try:
            _, written = await _carry_out(status_plan(claim, driver, entries), self.writer)
        except ApiError as err:
            problem = classify_write_error(err.status, err.message)
            metrics.claim_status_writes.labels(driver=driver, kind=kind, result=problem.value).inc()
            raise StatusWriteError(problem, err) from err
        finally:
            metrics.claim_status_write_duration.labels(driver=driver).observe(time.monotonic() - started)
        metrics.claim_status_writes.labels(driver=driver, kind=kind, result="ok").inc()
        updated = self.cache.project(written, self.keep_test_annotations)
        self.cache.claims.put(updated)
        return self.cache.claims.get(updated.metadata.uid) or updated

    async def read(self, namespace: str, name: str, uid: str) -> ResourceClaim | None:
        """A live read of the claim; None when it is gone or is another claim of the same name, in
        which case the cache forgets it too (its DELETED event may have been missed or overtaken)."""
        try:
            body = await self.reader.get(RESOURCE_CLAIMS.path(name, namespace=namespace))
        except ApiError as err:
            if err.not_found:
                self.cache.claims.remove(uid)
                return None
            raise
        claim = self.cache.project(body, self.keep_test_annotations)
        if claim.metadata.uid != uid:
            self.cache.claims.remove(uid)
            return None
        self.cache.claims.put(claim)
        return self.cache.claims.get(uid) or claim


class LedgerWriter:
    """Record writes (:mod:`.ledger` plans them). A write built on a stale record answers a
    :class:`Requeue` instead of the stored record: the record was re-read into the index, and the
    claim is synced again from it."""

    def __init__(self, writer: Writer, index: LedgerIndex, namespace: str) -> None:
        self.writer = writer
        self.index = index
        self.namespace = namespace

    def _store(self, body: Any) -> DeviceAttachment | Requeue:
        try:
            record = DeviceAttachment.model_validate(body)
        except ValidationError as err:
            return Requeue(5.0, f"the API server returned an unreadable record: {err}")
        put_record(self.index, record)
        return self.index.get(record.metadata.name) or record

    async def _refresh(self, name: str, stale: Requeue) -> Requeue:
        try:
            stored = self._store(await self.writer.client.get(ledger.record_path(self.namespace, name)))
        except ApiError as read:
            if not read.not_found:
                raise
            self.index.remove(name)
        else:
            if isinstance(stored, Requeue):
                return stored
        return stale

    async def _stored(self, plan: Plan, name: str) -> DeviceAttachment | Requeue:
        result, reply = await _carry_out(plan, self.writer)
        if isinstance(result, Requeue):
            return await self._refresh(name, result)
        return self._store(reply)

    async def create(self, record: DeviceAttachment) -> DeviceAttachment | Requeue:
        return await self._stored(ledger.create_plan(record, self.namespace), record.metadata.name)

    async def update(self, record: DeviceAttachment) -> DeviceAttachment | Requeue:
        return await self._stored(ledger.update_plan(record, self.namespace), record.metadata.name)

    async def finish(self, record: DeviceAttachment) -> Requeue | None:
        """Store the final status without our finalizer, then delete the record."""
        name = record.metadata.name
        current = record
        release = ledger.release_plan(record, self.namespace)
        if release is not None:
            result, reply = await _carry_out(release, self.writer)
            if isinstance(result, Requeue):
                return await self._refresh(name, result)
            if reply is None:  # gone already
                self.index.remove(name)
                return None
            stored = self._store(reply)
            if isinstance(stored, Requeue):
                return stored
            current = stored
        await execute(ledger.delete_plan(current, self.namespace), self.writer)
        self.index.remove(name)
        return None


log = logging.getLogger(__name__)

POD_MEMO_SECONDS = 1.0
NODE_TTL_SECONDS = 60.0
SLICE_TTL_SECONDS = 5.0

V = TypeVar("V")


@dataclass
class _Entry(Generic[V]):
    value: V
    at: float


class _TtlCache(Generic[V]):
    def __init__(self, ttl: float, limit: int = 4096) -> None:
        self.ttl = ttl
        self.limit = limit
        self._entries: dict[str, _Entry[V]] = {}

    def get(self, key: str) -> _Entry[V] | None:
        entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry.at <= self.ttl:
            return entry
        return None

    def put(self, key: str, value: V) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = _Entry(value, time.monotonic())


class Lookups:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._pods: _TtlCache[Pod | None] = _TtlCache(POD_MEMO_SECONDS)
        self._nodes: _TtlCache[Node | None] = _TtlCache(NODE_TTL_SECONDS)
        self._slices: _TtlCache[tuple[ResourceSlice, ...]] = _TtlCache(SLICE_TTL_SECONDS, limit=256)

    async def pods(self, namespace: str, consumers: Sequence[ConsumerReference]) -> list[Pod]:
        """The consumer pods that exist with the UID the claim names (others are left out)."""
        found = []
        for consumer in consumers:
            if not is_dns_subdomain(consumer.name):
                # reservedFor takes any name; one no pod can have must not become a request path.
                continue
            pod = await self._pod(namespace, consumer.name)
            if pod is not None and pod.metadata.uid == consumer.uid:
                found.append(pod)
        return found

    async def _pod(self, namespace: str, name: str) -> Pod | None:
        key = f"{namespace}/{name}"
        cached = self._pods.get(key)
        if cached is not None:
            return cached.value
        body = await self._get_or_none(PODS.path(name, namespace=namespace))
        pod = _parse(Pod, body)
        self._pods.put(key, pod)
        return pod

    async def node(self, name: str | None) -> Node | None:
        """The Node for an action request; a failed read gives None (the request then lacks details)."""
        if not name:
            return None
        cached = self._nodes.get(name)
        if cached is not None:
            return cached.value
        try:
            node = _parse(Node, await self._get_or_none(NODES.path(name)))
        except ApiError as err:
            log.warning("could not read Node %s: %s", name, err)
            return None
        self._nodes.put(name, node)
        return node

    async def device(self, driver: str, pool: str, device: str) -> ActionDevice | None:
        """The device as currently published, or None (no longer published, or the read failed)."""
        cached = self._slices.get(driver)
        if cached is not None:
            slices = cached.value
        else:
            try:
                listing = await self.client.get(RESOURCE_SLICES.path(), fieldSelector=f"spec.driver={driver}")
            except ApiError as err:
                log.warning("could not list the ResourceSlices of %s: %s", driver, err)
                return None
            parsed = (_parse(ResourceSlice, item) for item in listing.get("items", []))
            slices = tuple(s for s in parsed if s is not None)
            self._slices.put(driver, slices)
        return published_device(slices, driver, pool, device)

    async def _get_or_none(self, path: str) -> Any:
        try:
            return await self.client.get(path)
        except ApiError as err:
            if err.not_found:
                return None
            raise


M = TypeVar("M", Pod, Node, ResourceSlice)


def _parse(model: type[M], body: Any) -> M | None:
    if body is None:
        return None
    return parse_or_skip(model, body, log)


TAINT_KEY = "dra-operators.io/attach-failed"
EXPIRES_ANNOTATION = "dra-operators.io/expires-at"


def rule_body(
    api_version: str, device: DeviceId, reason: str, policy_name: str, expires: datetime
) -> dict[str, Any]:
    """``api_version`` is the discovered one: the selector and taint fields are alike in every version.

    The taint's value is the failure reason as a label value (``Vendor:Timeout`` becomes
    ``Vendor-Timeout``): the policy's reasons are condition reasons, which may hold ':' and ',' and end
    in '_', and the API server refuses such a taint value, so the rule would never be created."""
    return {
        "apiVersion": api_version,
        "kind": taintrules.KIND,
        "metadata": {
            "name": taint_rule_name(device),
            "labels": {LABEL_POLICY: policy_name},
            "annotations": {EXPIRES_ANNOTATION: format_time(expires)},
        },
        "spec": {
            "deviceSelector": {"driver": device.driver, "pool": device.pool, "device": device.device},
            "taint": {"key": TAINT_KEY, "value": label_value_of(reason), "effect": "NoSchedule"},
        },
    }


def expired(rule: dict[str, Any], now: datetime) -> bool:
    stamp = ((rule.get("metadata") or {}).get("annotations") or {}).get(EXPIRES_ANNOTATION)
    if not stamp:
        return False
    try:
        return parse_time(stamp) <= now
    except ValueError:
        return True  # an unreadable expiry was not written by us as such; do not keep it forever


def taint_plan(
    rules: ServedResource, device: DeviceId, reason: str, policy_name: str, expires: datetime
) -> Plan:
    """Create the device's rule; one that exists (409) already keeps the device from being picked."""
    body = rule_body(rules.api_version, device, reason, policy_name, expires)
    return Plan((Create(rules.path(), body, field_manager=True),))


def expired_rules(listing: Mapping[str, Any], rules: ServedResource, now: datetime) -> list[Delete]:
    """The deletes of our listed rules whose expiry has passed, each if it is still that rule."""
    deletes = []
    for rule in listing.get("items", []):
        if expired(rule, now):
            meta = rule.get("metadata") or {}
            deletes.append(Delete(rules.path(meta.get("name")), meta.get("uid") or ""))
    return deletes


class TaintRules:
    """Failure taints as DeviceTaintRules of the version the runtime discovered (``api``, set when
    the controller is prepared). Without one nothing is tainted: the policies then disable their
    taints and say so (:data:`.policy.TAINT_INACTIVE`), so no taint is ever asked for."""

    def __init__(self, writer: Writer, api: ServedResource | None = None) -> None:
        self.writer = writer
        self.api = api

    async def taint(self, device: DeviceId, reason: str, policy_name: str, duration: timedelta) -> None:
        rules = self.api
        if rules is None:
            return
        plan = taint_plan(rules, device, reason, policy_name, time_after(datetime.now(UTC), duration))
        try:
            await execute(plan, self.writer)
        except ApiError as err:
            log.warning("could not taint device %s: %s", device, err)

    async def sweep(self) -> None:
        """Delete our rules whose expiry has passed."""
        rules = self.api
        if rules is None:
            return
        try:
            listing = await self.writer.client.get(rules.path(), labelSelector=LABEL_POLICY)
        except ApiError as err:
            log.warning("could not list DeviceTaintRules: %s", err)
            return
        for delete in expired_rules(listing, rules, datetime.now(UTC)):
            # One plan each: a refused delete is logged and the sweep goes on with the others.
            try:
                await execute(Plan((delete,)), self.writer)
            except ApiError as err:
                log.warning(
                    "could not delete expired DeviceTaintRule %s: %s", delete.path.rsplit("/", 1)[-1], err
                )


RETRY_SECONDS = 1.0


def mirror_plan(path: str, name: str, namespace: str, data: Mapping[str, str]) -> Plan:
    """Apply the whole ``data`` of our field manager; any refusal (even 404, the namespace is
    missing) is retried, as the mirror is what a restarted process loads back."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": dict(data),
    }
    return Plan((Apply(path, body, tolerate=frozenset()),))


class InventoryMirror:
    def __init__(self, writer: Writer, namespace: str, spawn: Spawn) -> None:
        self._spawn = spawn
        self.writer = writer
        self.namespace = namespace
        self._parts: dict[str, dict[str, dict[str, str]]] = {}
        self._dirty: set[str] = set()
        self._writers: dict[str, asyncio.Task[None]] = {}

    def path(self, name: str) -> str:
        return CONFIG_MAPS.path(name, namespace=self.namespace)

    async def load(self, name: str) -> dict[str, str]:
        try:
            body: dict[str, Any] = await self.writer.client.get(self.path(name))
        except ApiError as err:
            if err.not_found:
                return {}
            raise
        return dict(body.get("data") or {})

    def listener(self, name: str, owner: str) -> Any:
        def publish(data: dict[str, str]) -> None:
            self._parts.setdefault(name, {})[owner] = dict(data)
            self._dirty.add(name)
            writer = self._writers.get(name)
            if writer is None or writer.done():
                self._writers[name] = self._spawn(self._write(name), f"mirror-{name}")

        return publish

    async def _write(self, name: str) -> None:
        while name in self._dirty:
            self._dirty.discard(name)
            data: dict[str, str] = {}
            for part in self._parts.get(name, {}).values():
                data.update(part)
            try:
                await execute(mirror_plan(self.path(name), name, self.namespace, data), self.writer)
            except ApiError as err:
                log.warning("could not mirror the test inventory into ConfigMap %s: %s", name, err)
                self._dirty.add(name)
                await asyncio.sleep(RETRY_SECONDS)

    async def close(self) -> None:
        for task in self._writers.values():
            task.cancel()
        await asyncio.gather(*self._writers.values(), return_exceptions=True)


@dataclass(frozen=True)
class Kube:
    """The API calls of a claim sync, by what they touch."""

    claims: StatusWriter
    ledger: LedgerWriter
    lookups: Lookups
    taints: TaintRules
