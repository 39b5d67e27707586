"""Timing the benchmarks' end points by watch events, timed on arrival.

A LIST poll blurs the moment a condition became true by the poll's interval plus the
duration of the listing itself (hundreds of milliseconds for a thousand pods on a loaded
two-core machine), and the listings load the machine that is being measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from devcluster.kube import wait_for
from operators.core.client import KubeClient

Handler = Callable[[dict[str, Any], float, float], None]
"""Called with the object, ``time.monotonic()`` and ``time.time()`` at its arrival."""


@dataclass
class WatchStats:
    opened: int = 0
    """Watches whose stream is open (their answer's headers arrived)."""
    relists: int = 0
    """Listings after the first: the server no longer had the version to resume from."""


GONE = 410
RETRY_SECONDS = 0.2


def _version(body: Mapping[str, Any]) -> str | None:
    version = (body.get("metadata") or {}).get("resourceVersion")
    return str(version) if version else None


async def _watch(client: KubeClient, path: str, handle: Handler, stats: WatchStats) -> None:
    """List, then watch from the listing. A watch that ends goes on from the newest version it
    delivered, as client-go's reflector does: on a saturated machine kube-apiserver closes
    watchers that fall ten events behind ("Forcing watcher close due to unresponsiveness"),
    several times per 1000-pod burst, and a listing each time would time the objects it finds
    late and load the machine being measured. Only an answer that the version is gone (410) or
    an ERROR event lists again; objects first seen in such a listing are timed by it (counted,
    and said)."""
    version: str | None = None
    opened = False
    ended = ""
    while True:
        if version is None:
            listing = await client.get(path)
            now, wall = time.monotonic(), time.time()
            for item in listing.get("items", []):
                handle(item, now, wall)
            if opened:
                stats.relists += 1
                print(f"bench watch on {path} resumed by a listing after: {ended}", file=sys.stderr)
            version = _version(listing)
        headers = {"Accept": "application/json"}
        await client.api.update_params_for_auth(headers, [], ["BearerToken"])
        params = {"watch": "true", "resourceVersion": version or "", "allowWatchBookmarks": "true"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        session = client.api.rest_client.pool_manager
        try:
            async with session.get(
                client.server + path, params=params, headers=headers, timeout=timeout
            ) as answer:
                if answer.status == GONE:
                    version, ended = None, f"HTTP {GONE} for version {version}"
                    continue
                answer.raise_for_status()
                if not opened:
                    stats.opened += 1
                    opened = True
                async for line in answer.content:
                    now, wall = time.monotonic(), time.time()
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    kind, body = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        # Expired (410) or not, the watch cannot say what it missed; a listing can.
                        version = None
                        ended = f"ERROR event {body.get('code')} {body.get('message', '')!r}"
                        break
                    version = _version(body) or version
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        handle(body, now, wall)
                else:
                    ended = "the server closed the stream"
        except (aiohttp.ClientError, ValueError) as err:
            ended = repr(err)
            await asyncio.sleep(RETRY_SECONDS)


class Watches:
    """The running watches; :meth:`check` raises once they have died."""

    def __init__(self, task: asyncio.Task[None], stats: WatchStats) -> None:
        self.task = task
        self.stats = stats

    def check(self) -> None:
        if self.task.done():
            self.task.result()
            raise AssertionError("the bench's watches ended")


@contextlib.contextmanager
def watching(kubeconfig: str, handlers: Mapping[str, Handler]) -> Iterator[Watches]:
    """Watch each path with its handler, on an event loop of its own, from before the block
    starts (every watch is open) until it ends. Handlers run on that loop's thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="bench-watch", daemon=True)
    thread.start()
    stats = WatchStats()

    async def main() -> None:
        client = await KubeClient.from_kubeconfig(kubeconfig, qps=0, burst=1)
        try:
            await asyncio.gather(*(_watch(client, path, handle, stats) for path, handle in handlers.items()))
        finally:
            await client.close()

    async def start() -> asyncio.Task[None]:
        return asyncio.create_task(main())

    async def stop(task: asyncio.Task[None]) -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    task = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        wait_for(lambda: stats.opened == len(handlers) or task.done(), 30, "the bench's watches")
        watches = Watches(task, stats)
        watches.check()
        yield watches
    finally:
        asyncio.run_coroutine_threadsafe(stop(task), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class FirstSeen:
    """When each object (by name) was first seen satisfying a predicate; the bench's end point
    is the arrival of the last one."""

    def __init__(self, predicate: Callable[[dict[str, Any]], bool]) -> None:
        self.predicate = predicate
        self.at: dict[str, float] = {}

    def __call__(self, body: dict[str, Any], now: float, _wall: float) -> None:
        name = body["metadata"]["name"]
        if name not in self.at and self.predicate(body):
            self.at[name] = now

    def wait(self, watches: Watches, count: int, timeout: float, what: str) -> float:
        """The arrival of the ``count``-th object; the poll only reads this process's memory."""

        def all_seen() -> bool:
            watches.check()
            return len(self.at) >= count

        wait_for(all_seen, timeout, what, interval=0.05)
        return max(list(self.at.values()))
