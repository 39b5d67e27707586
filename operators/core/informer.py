"""A list-then-watch informer for the built-in kinds the operators only observe, as client-go's
reflector does it, on the project's own client.

Why not kopf for these: kopf hands every event to a per-object worker task and through its
handler machinery, 2.25 ms of CPU per pod event measured (``docs/architecture.md``), paid for
every pod of the cluster, DRA or not. Here an event is one parsed line handed to the
controller's callback inline; the controller's projection keeps only what a sync reads.

- **List**: paginated, every object handed over as an upsert; the list's resourceVersion is
  where the watch starts, so nothing between the two is missed. A next page refused with 410
  (the listing outlived etcd's snapshot) lists again in one request, as client-go's pager.
- **Watch**: from the last resourceVersion seen, with bookmarks (the server sends the current
  resourceVersion about every minute, so a restarted watch resumes close to now). The server
  ends each watch after ``timeoutSeconds`` (5 to 10 minutes, randomised as client-go does);
  the informer then resumes from where it was.
- **410 Gone** (the resourceVersion is older than etcd keeps): list again. Objects that were
  known and are missing from the new list are handed over as deletions, each a
  :class:`~.models.Tombstone`, so a deletion during the gap is never lost. For that the informer
  keeps, per object, its UID and ``namespace/name`` (about 200 bytes), nothing else.
- **A dropped connection, an ERROR event, or a watch ended within a second without an event**:
  resume from the last resourceVersion after a backoff (0.8 s doubling to 30 s, reset by a
  successful event), as client-go's reflector.

One informer per kind and process (the runtime keeps them by kind). Metrics:
``dra_operators_watch_events_total{resource,type}`` (shared with kopf's watches),
``dra_operators_informer_relists_total{resource,reason}`` and
``dra_operators_informer_last_event_timestamp_seconds{resource}`` (an event or a bookmark;
older than a few minutes means a stuck watch).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from . import metrics, wirejson
from .client import ApiError, KubeClient
from .models import Tombstone

log = logging.getLogger(__name__)

PAGE_SIZE = 500
MIN_WATCH_SECONDS = 300
BACKOFF_INITIAL = 0.8
BACKOFF_MAX = 30.0
SHORT_WATCH_SECONDS = 1.0

Deliver = Callable[[Mapping[str, Any], bool], None]
"""``deliver(object, deleted)``: hand one object to the controller; must not raise."""


class Gone(Exception):
    """The server no longer has the resourceVersion the watch asked for."""


class _ContinueExpired(Exception):
    """The server no longer has the snapshot a listing's next page was to be read from."""


def _identity(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("uid"):
        return None
    namespace = meta.get("namespace")
    return str(meta["uid"]), f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _tombstone(uid: str, ref: str, api_version: str, kind: str) -> Tombstone:
    namespace, slash, name = ref.partition("/")
    meta = {"uid": uid, "name": name, "namespace": namespace} if slash else {"uid": uid, "name": ref}
    return Tombstone(apiVersion=api_version, kind=kind, metadata=meta)


class Informer:
    def __init__(
        self,
        client: KubeClient,
        path: str,
        resource: str,
        deliver: Deliver,
        *,
        page_size: int = PAGE_SIZE,
        min_watch_seconds: int = MIN_WATCH_SECONDS,
        backoff_initial: float = BACKOFF_INITIAL,
    ) -> None:
        self.client = client
        self.path = path
        self.resource = resource
        self._deliver = deliver
        self._page_size = page_size
        self._min_watch_seconds = min_watch_seconds
        self._backoff_initial = backoff_initial
        self.resource_version = ""
        # uid -> "namespace/name" of every object seen and not deleted: the deletions a re-list finds.
        self._known: dict[str, str] = {}
        self._api_version = ""
        self._kind = ""
        self.served = True
        self.relists = 0

    # -- listing ------------------------------------------------------------------------------

    async def _pages(self, limit: int) -> AsyncIterator[list[dict[str, Any]]]:
        params = {"limit": str(limit)} if limit else {}
        while True:
            try:
                page = await self.client.get(self.path, **params)
            except ApiError as err:
                if err.status == 410 and "continue" in params:
                    raise _ContinueExpired(err.message) from err
                raise
            self._api_version = str(page.get("apiVersion", ""))
            self._kind = str(page.get("kind", "")).removesuffix("List")
            items: list[dict[str, Any]] = page.get("items") or []
            for item in items:
                item.setdefault("apiVersion", self._api_version)
                item.setdefault("kind", self._kind)
            yield items
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                self.resource_version = str(meta.get("resourceVersion", ""))
                return
            params = {"limit": str(limit), "continue": token}

    async def _hand_over(self, limit: int, listed: dict[str, str]) -> int:
        count = 0
        async for items in self._pages(limit):
            for item in items:
                count += 1
                identity = _identity(item)
                if identity is not None:
                    listed[identity[0]] = identity[1]
                    # Known at once, not only once the listing completes: should a later page
                    # fail, the next listing still finds this object's deletion.
                    self._known[identity[0]] = identity[1]
                self._deliver(item, False)
        return count

    async def list(self) -> int:
        """Hand every object over; returns how many. An unserved kind (a CRD not installed, an
        API the cluster lacks) lists as empty and is not watched."""
        listed: dict[str, str] = {}
        try:
            try:
                count = await self._hand_over(self._page_size, listed)
            except _ContinueExpired as err:
                # Listing took longer than etcd keeps the first page's snapshot; page by page
                # again would expire alike. One request, as client-go's pager falls back to. What
                # the pages handed over is known, so what this listing lacks of it is deleted.
                log.warning("listing %s expired part way (%s); listing again in one request", self.path, err)
                listed.clear()
                count = await self._hand_over(0, listed)
        except ApiError as err:
            if err.not_found:
                log.warning("%s is not served; nothing to list or watch", self.path)
                self.served = False
                return 0
            raise
        for uid in self._known.keys() - listed.keys():
            log.info("%s %s was deleted while the watch was down", self.resource, self._known[uid])
            self._deliver(_tombstone(uid, self._known[uid], self._api_version, self._kind), True)
        self._known = listed
        self.served = True
        metrics.informer_event(self.resource)
        return count

    # -- watching -----------------------------------------------------------------------------

    def _handle(self, line: bytes) -> None:
        event = wirejson.loads(line)
        event_type = event.get("type")
        obj = event.get("object") or {}
        if event_type == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone(obj.get("message", ""))
            raise ApiError(int(code or 0), str(obj.get("reason", "")), str(obj.get("message", "")))
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if event_type == "BOOKMARK":
            if version:
                self.resource_version = str(version)
            metrics.informer_event(self.resource)
            return
        metrics.watch_event(self.resource, event_type)
        metrics.informer_event(self.resource)
        deleted = event_type == "DELETED"
        uid = (obj.get("metadata") or {}).get("uid")
        # Every pod event of the cluster passes here: the reference string is built only for a
        # UID not known yet (a UID's name never changes).
        if uid:
            if deleted:
                self._known.pop(uid, None)
            elif uid not in self._known:
                identity = _identity(obj)
                if identity is not None:
                    self._known[identity[0]] = identity[1]
        obj.setdefault("apiVersion", self._api_version)
        obj.setdefault("kind", self._kind)
        self._deliver(obj, deleted)
        if version:
            self.resource_version = str(version)

    async def watch_once(self) -> bool:
        """One watch request, from the current resourceVersion, until the server ends it. False
        when it ended within a second without an event, as client-go's reflector counts a "very
        short watch": a failure, not a watch to resume at once."""
        seconds = int(self._min_watch_seconds * (1 + random.random()))
        params = {"resourceVersion": self.resource_version, "allowWatchBookmarks": "true"}
        started = time.monotonic()
        events = 0
        try:
            async for line in self.client.watch_lines(self.path, params, seconds):
                self._handle(line)
                events += 1
        except ApiError as err:
            if err.status == 410:
                raise Gone(err.message) from err
            raise
        return events > 0 or time.monotonic() - started >= SHORT_WATCH_SECONDS

    async def run(self) -> None:
        """Watch until cancelled: resume after the server's timeout, re-list on 410 and on an
        event it cannot read, back off after a failure. Nothing but cancellation ends it: a dead
        watch would leave the operator ready and blind."""
        if not self.served:
            return
        backoff = self._backoff_initial
        while True:
            started = time.monotonic()
            try:
                if await self.watch_once():
                    backoff = self._backoff_initial
                    continue
                # A server or a proxy that closes every watch as it opens would otherwise be asked
                # again at once, for ever, spending the reader's request budget.
                log.warning(
                    "watch of %s ended at once without an event; resuming from %s",
                    self.path,
                    self.resource_version,
                )
            except Gone as gone:
                log.info("watch of %s expired (%s); listing again", self.path, gone)
                if await self._relist("gone"):
                    continue
            except ValueError as err:
                # A line that is not JSON, nested too deep or longer than the read buffer: resuming
                # from where we are would read it again, for ever. A listing reads whole pages.
                log.error("watch of %s sent an event it cannot read (%s); listing again", self.path, err)
                if await self._relist("unreadable"):
                    continue
            except ApiError as err:
                log.warning("watch of %s failed: %s; resuming from %s", self.path, err, self.resource_version)
            except Exception:
                # Not expected (the callbacks catch their own errors), and what was missed is not known.
                log.exception("watch of %s failed unexpectedly; listing again", self.path)
                if await self._relist("unexpected"):
                    continue
            if time.monotonic() - started > BACKOFF_MAX:
                backoff = self._backoff_initial
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    async def _relist(self, reason: str) -> bool:
        self.relists += 1
        metrics.informer_relist(self.resource, reason)
        try:
            await self.list()
        except (ApiError, ValueError) as err:
            log.warning("re-listing %s failed: %s", self.path, err)
            return False
        except Exception:
            log.exception("re-listing %s failed unexpectedly", self.path)
            return False
        return True
