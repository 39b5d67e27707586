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

from e2e.kube import wait_for
from operators.core.client import KubeClient

Handler = Callable[[dict[str, Any], float, float], None]
"""Called with the object, ``time.monotonic()`` and ``time.time()`` at its arrival."""


@dataclass
class WatchStats:
    opened: int = 0
    """Watches whose stream is open (their answer's headers arrived)."""
    relists: int = 0


async def _watch(client: KubeClient, path: str, handle: Handler, stats: WatchStats) -> None:
    """List, then watch from the listing. A watch that ends (an ERROR event, a closed stream)
    lists again and goes on; objects first seen in such a listing are timed by it (counted)."""
    first = True
    ended = ""
    while True:
        listing = await client.get(path)
        now, wall = time.monotonic(), time.time()
        for item in listing.get("items", []):
            handle(item, now, wall)
        if not first:
            stats.relists += 1
            # Objects first seen in this listing are timed by it, later than they arrived: say so
            # in the bench's output, with the reason the watch ended.
            print(f"bench watch on {path} resumed by a listing after: {ended}", file=sys.stderr)
        headers = {"Accept": "application/json"}
        await client.api.update_params_for_auth(headers, [], ["BearerToken"])
        params = {"watch": "true", "resourceVersion": listing["metadata"]["resourceVersion"]}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        session = client.api.rest_client.pool_manager
        try:
            async with session.get(
                client.server + path, params=params, headers=headers, timeout=timeout
            ) as answer:
                if first:
                    stats.opened += 1
                    first = False
                async for line in answer.content:
                    now, wall = time.monotonic(), time.time()
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        ended = f"ERROR event {event.get('object', {}).get('message', '')!r}"
                        break
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        handle(event["object"], now, wall)
                else:
                    ended = "the server closed the stream"
        except (aiohttp.ClientError, ValueError) as err:
            ended = repr(err)


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
