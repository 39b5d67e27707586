"""Core v1 Events with client-go's de-duplication.

An identical Event (same involved object UID, type, reason and message) is not created
again: the existing one gets its ``count`` incremented and ``lastTimestamp`` set, as
client-go's recorder does. Like client-go's correlator, *similar* Events (same object, type
and reason, different messages, e.g. API errors that name a random generated object) are
aggregated after ``SIMILAR_LIMIT`` distinct messages within ``SIMILAR_WINDOW`` seconds: the rest
go into one Event whose message starts with ``(combined from similar events): ``. And like its
spam filter, each object's Events are written at most :data:`SPAM_BURST` at once, then one every
five minutes.
The recorder remembers the Events it created in a bounded LRU; after
a restart the first repetition creates a new Event, like a restarted kube-controller-manager.

A message is cut to :data:`NOTE_LENGTH_LIMIT` bytes, ending in ``...``, the combined prefix
included. kube-apiserver only checks that limit on an Event with an ``eventTime``, which these
core/v1 Events do not set, but kube-scheduler cuts its Events to it, and a text that comes from
elsewhere (an API error, a webhook's answer) is then never a reason to lose an Event, nor to keep
an unbounded text in the de-duplication memory below.

Posting an Event never fails the caller: Events are diagnostics, and a lost one must not block
or retry the reconciliation that emitted it. :meth:`EventRecorder.record` does not even make
the caller wait: like client-go's broadcaster it hands the Event to one background sender
(bounded backlog; overflow is dropped with a log line), so Events cost no latency on a hot path.
That sender sends an Event again while the API server does not answer (:data:`SEND_TRIES`), so
that a restart of the API server costs no Events; an Event it refuses is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import string
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .backoff import Backoff
from .client import MERGE_PATCH, Answer, ApiError, KubeClient
from .conditions import now_rfc3339
from .ratelimit import TokenBucket
from .resources import EVENTS
from .texts import ELLIPSIS, truncate_utf8

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
REMEMBERED_EVENTS = 4096
SIMILAR_LIMIT = 10
SIMILAR_WINDOW = 600.0
COMBINED_PREFIX = "(combined from similar events): "
# client-go's broadcaster queues up to 1000 Events before it drops them.
BACKLOG_LIMIT = 1000
SPAM_BURST = 25
SPAM_QPS = 1 / 300
"""client-go's spam filter: the Events written about one object (and type) come from a bucket of
their own, so that an object that fails many times a second (a tenant's pod updated in a loop, each
update a sync that reports the same failure) costs a burst of writes, then one every five minutes,
and neither takes the Event budget of the others nor the API server's. An occurrence not written
is still counted, in the next write of its Event."""
SEND_TRIES = 12
"""How often one Event is sent while the API server does not answer (client-go's
``maxTriesPerEvent``); an answer that refuses it is not sent again."""
SEND_RETRY = Backoff(1.0, maximum=10.0, jitter=0.2)
"""The pause before each try after the first: about a minute and a half in all, as client-go's ten
seconds between tries bound its wait to two minutes."""
NOTE_LENGTH_LIMIT = 1024
"""kube-apiserver's limit on an Event's message (``NoteLengthLimit``), in bytes: Go's ``len``."""


def _note(message: str) -> str:
    return truncate_utf8(message, NOTE_LENGTH_LIMIT, ELLIPSIS)


@dataclass(frozen=True)
class ObjectRef:
    api_version: str
    kind: str
    name: str
    namespace: str | None
    uid: str

    def to_dict(self) -> dict[str, Any]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid}
        if self.namespace:
            ref["namespace"] = self.namespace
        return ref

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass
class _Posted:
    namespace: str
    name: str
    count: int


def _suffix() -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=10))


# An Event's name is a DNS subdomain, at most 253 characters.
NAME_MAX_LENGTH = 253


def event_name(object_name: str) -> str:
    """``<object>.<random suffix>``, the object's name shortened so that the suffix always fits:
    cut from the end instead, every Event of an object with a 253-character name would get the
    object's own name, and all but the first would fail with AlreadyExists."""
    suffix = _suffix()
    return f"{object_name[: NAME_MAX_LENGTH - len(suffix) - 1].rstrip('.-')}.{suffix}"


class EventRecorder:
    def __init__(self, client: KubeClient, component: str, instance: str = "") -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self._posted: OrderedDict[tuple[str, str, str, str], _Posted] = OrderedDict()
        self._similar: OrderedDict[tuple[str, str, str], list[float]] = OrderedDict()
        self._backlog: deque[tuple[ObjectRef, str, str, str]] = deque()
        self._sender: asyncio.Task[None] | None = None
        self._budgets: OrderedDict[tuple[ObjectRef, str], TokenBucket] = OrderedDict()
        self.clock: Callable[[], float] = time.monotonic
        # An operator's metric of dropped Events, if it has one.
        self.on_dropped: Callable[[], None] | None = None

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Post in the background, in order; the caller goes on at once."""
        if len(self._backlog) >= BACKLOG_LIMIT:
            log.warning("Event backlog full; dropping %s %s on %s: %s", type_, reason, obj, message)
            if self.on_dropped is not None:
                self.on_dropped()
            return
        self._backlog.append((obj, type_, reason, _note(message)))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_backlog())

    async def _send_backlog(self) -> None:
        while self._backlog:
            await self.emit(*self._backlog.popleft())

    async def drain(self, timeout: float) -> None:
        """Before the process exits: post what was recorded, for at most ``timeout`` seconds."""
        sender = self._sender
        if sender is None or sender.done():
            return
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(sender, timeout)
        if self._backlog:
            log.info("exiting with %d Events not posted", len(self._backlog))

    def _aggregate(self, obj: ObjectRef, type_: str, reason: str, message: str) -> str:
        """The message to post: itself, or the combined form once similar ones pile up."""
        now = self.clock()
        seen = self._similar.setdefault((obj.uid, type_, reason), [])
        seen[:] = [t for t in seen if now - t < SIMILAR_WINDOW]
        if (obj.uid, type_, reason, message) not in self._posted:
            seen.append(now)
        self._similar.move_to_end((obj.uid, type_, reason))
        while len(self._similar) > REMEMBERED_EVENTS:
            self._similar.popitem(last=False)
        return _note(COMBINED_PREFIX + message) if len(seen) > SIMILAR_LIMIT else message

    async def emit(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        # Cut before it is compared: two texts that differ only past the limit post the same Event.
        message = self._aggregate(obj, type_, reason, _note(message))
        # All combined messages of one (object, type, reason) share one Event.
        key = (obj.uid, type_, reason, COMBINED_PREFIX if message.startswith(COMBINED_PREFIX) else message)
        posted = self._posted.get(key)
        if posted is not None:
            # Counted once, here: a PATCH sent again after an unanswered one carries the same count.
            posted.count += 1
            self._posted.move_to_end(key)
        if not self._within_budget(obj, type_):
            log.debug("Event %s %s on %s not written: its object's Event budget is spent", type_, reason, obj)
            return
        now = now_rfc3339()
        # Chosen once: a create sent again after an unanswered one finds its own Event, not a twin.
        name = event_name(obj.name)
        for attempt in range(SEND_TRIES):
            try:
                await self._write(key, obj, type_, reason, message, now, name)
                return
            except ApiError as err:
                if err.answer is not Answer.TRANSIENT or attempt == SEND_TRIES - 1:
                    log.warning("could not post Event %s %s on %s: %s", type_, reason, obj, err)
                    return
                delay = SEND_RETRY.delay(attempt)
                log.info(
                    "could not post Event %s %s on %s: %s; again in %.1fs", type_, reason, obj, err, delay
                )
            # The Events behind this one wait too, as in client-go: the API server is what is missing.
            await asyncio.sleep(delay)

    def _within_budget(self, obj: ObjectRef, type_: str) -> bool:
        now = self.clock()
        bucket = self._budgets.get((obj, type_))
        if bucket is None:
            bucket = self._budgets[(obj, type_)] = TokenBucket(SPAM_QPS, SPAM_BURST, now)
        self._budgets.move_to_end((obj, type_))
        while len(self._budgets) > REMEMBERED_EVENTS:
            self._budgets.popitem(last=False)
        return bucket.try_take(now) == 0.0

    async def _write(
        self,
        key: tuple[str, str, str, str],
        obj: ObjectRef,
        type_: str,
        reason: str,
        message: str,
        now: str,
        name: str,
    ) -> None:
        posted = self._posted.get(key)
        if posted is not None:
            patch: dict[str, object] = {"count": posted.count, "lastTimestamp": now}
            if key[3] == COMBINED_PREFIX:
                patch["message"] = message
            try:
                await self.client.patch(
                    EVENTS.path(posted.name, namespace=posted.namespace),
                    patch,
                    content_type=MERGE_PATCH,
                )
            except ApiError as err:
                if not err.not_found:
                    raise
                # The Event expired (kube-apiserver's --event-ttl, an hour after it last changed) or
                # was deleted: this occurrence starts a new one, as client-go's recorder does, rather
                # than being lost.
                del self._posted[key]
            else:
                return
        namespace = obj.namespace or "default"
        try:
            await self.client.create(
                EVENTS.path(namespace=namespace),
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": obj.to_dict(),
                    "type": type_,
                    "reason": reason,
                    "message": message,
                    "count": 1,
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "source": {"component": self.component},
                    "reportingComponent": self.component,
                    "reportingInstance": self.instance or self.component,
                },
            )
        except ApiError as err:
            # The name is this occurrence's own: only an earlier attempt whose answer was lost made it.
            if not err.conflict:
                raise
        self._posted[key] = _Posted(namespace, name, 1)
        while len(self._posted) > REMEMBERED_EVENTS:
            self._posted.popitem(last=False)
