"""The informer against a scripted HTTP peer that speaks the API server's list and watch
protocol: pagination, resume from the last resourceVersion, bookmarks, 410 and re-list, ERROR
events, a dropped connection. (The e2e tier runs it against the real kube-apiserver.)"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from operators.core import wirejson
from operators.core.client import KubeClient
from operators.core.informer import Informer
from operators.core.models import Tombstone

pytestmark = pytest.mark.unit

PATH = "/api/v1/pods"


def pod(name: str, uid: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv}}


def event(type_: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": type_, "object": obj}


def bookmark(rv: str) -> dict[str, Any]:
    return {
        "type": "BOOKMARK",
        "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv}},
    }


def gone() -> dict[str, Any]:
    return {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
    }


@dataclass
class Peer:
    """Lists ``objects`` (at ``list_rv``; bytes are an object's JSON text) two per page (all in
    one without a ``limit``); each
    watch request takes the next script: a list of events, then the stream ends; ``"drop"`` in a
    script cuts the connection there; a script ``410`` answers the request itself with 410; bytes
    in a script are sent as they are."""

    objects: list[dict[str, Any] | bytes]
    list_rv: str
    scripts: list[Any]
    watches: list[str] = field(default_factory=list)
    watched_at: list[float] = field(default_factory=list)
    lists: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return self._list(request)
        assert request.query["allowWatchBookmarks"] == "true"
        self.watches.append(request.query["resourceVersion"])
        self.watched_at.append(time.monotonic())
        if not self.scripts:
            self.done.set()
            await asyncio.sleep(3600)
        script = self.scripts.pop(0)
        if script == 410:
            return web.json_response(
                {"kind": "Status", "code": 410, "reason": "Expired", "message": "gone"}, status=410
            )
        response = web.StreamResponse()
        await response.prepare(request)
        for item in script:
            if item == "drop":
                assert request.transport is not None
                request.transport.close()
                return response
            line = item if isinstance(item, bytes) else json.dumps(item).encode()
            await response.write(line + b"\n")
        await response.write_eof()
        return response

    def _list(self, request: web.Request) -> web.Response:
        self.lists += 1
        start = int(request.query.get("continue", "0"))
        size = 2 if "limit" in request.query else len(self.objects)
        page = self.objects[start : start + size]
        meta: dict[str, Any] = {"resourceVersion": self.list_rv}
        if start + size < len(self.objects):
            meta["continue"] = str(start + size)
        items = ",".join(item.decode() if isinstance(item, bytes) else json.dumps(item) for item in page)
        head = json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": meta})
        return web.Response(text=f'{head[:-1]},"items":[{items}]}}', content_type="application/json")


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []
    clients: list[KubeClient] = []

    async def start(peer: Peer) -> KubeClient:
        app = web.Application()
        app.router.add_get(PATH, peer.handle)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        configuration = k8s_client.Configuration()
        configuration.host = f"http://127.0.0.1:{port}"
        client = KubeClient(configuration, qps=0)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()
    for runner in runners:
        await runner.cleanup()


class Seen:
    def __init__(self) -> None:
        self.items: list[tuple[str, str, bool]] = []
        self.bodies: list[Mapping[str, Any]] = []

    def __call__(self, obj: Mapping[str, Any], deleted: bool) -> None:
        self.items.append((obj["kind"], obj["metadata"]["name"], deleted))
        self.bodies.append(obj)


async def _run_until_idle(informer: Informer, peer: Peer) -> None:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(peer.done.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _seen_through_list_and_watch(serve: Any, peer: Peer) -> Seen:
    """What an informer of pods on ``peer`` delivers through one list and the watches after it."""
    seen = Seen()
    informer = Informer(await serve(peer), PATH, "pods", seen, backoff_initial=0.01)
    await informer.list()
    await _run_until_idle(informer, peer)
    return seen


async def test_list_then_watch_from_the_lists_version(serve: Any) -> None:
    peer = Peer(
        [pod("a", "1"), pod("b", "2"), pod("c", "3")],
        "100",
        [
            [
                event("ADDED", pod("d", "4", "101")),
                event("MODIFIED", pod("a", "1", "102")),
                event("DELETED", pod("b", "2", "103")),
            ]
        ],
    )
    seen = Seen()
    informer = Informer(await serve(peer), PATH, "pods", seen, page_size=2, backoff_initial=0.01)
    assert await informer.list() == 3
    assert informer.resource_version == "100"
    await _run_until_idle(informer, peer)
    assert seen.items == [
        ("Pod", "a", False),
        ("Pod", "b", False),
        ("Pod", "c", False),
        ("Pod", "d", False),
        ("Pod", "a", False),
        ("Pod", "b", True),
    ], "the list's kind is given to watched objects too"
    assert peer.watches == ["100", "103"], "the next watch resumes after the last event"


async def test_bookmarks_move_the_version_without_delivering(serve: Any) -> None:
    peer = Peer([], "5", [[bookmark("50"), bookmark("60")]])
    seen = await _seen_through_list_and_watch(serve, peer)
    assert seen.items == []
    assert peer.watches == ["5", "60"]


@pytest.mark.parametrize("expiry", ["event", "status"])
async def test_gone_lists_again_and_delivers_the_deletions_it_missed(serve: Any, expiry: str) -> None:
    script: Any = [gone()] if expiry == "event" else 410
    peer = Peer([pod("a", "1"), pod("b", "2")], "10", [script])
    seen = Seen()
    informer = Informer(await serve(peer), PATH, "pods", seen, backoff_initial=0.01)
    await informer.list()
    # While the watch was gone, b was deleted and c created.
    peer.objects, peer.list_rv = [pod("a", "1"), pod("c", "3")], "20"
    await _run_until_idle(informer, peer)
    assert seen.items[2:] == [("Pod", "a", False), ("Pod", "c", False), ("Pod", "b", True)]
    # Only b's identity is known now: the controller reads the rest from what it cached.
    missed = seen.bodies[-1]
    assert isinstance(missed, Tombstone)
    assert missed == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"uid": "2", "name": "b", "namespace": "ns"},
    }
    assert not any(isinstance(body, Tombstone) for body in seen.bodies[:-1])
    assert peer.lists == 2
    assert peer.watches == ["10", "20"]
    assert informer.relists == 1


async def test_a_dropped_connection_resumes_from_the_last_event(serve: Any) -> None:
    peer = Peer([], "1", [[event("ADDED", pod("a", "1", "7")), "drop"], [event("ADDED", pod("b", "2", "8"))]])
    seen = await _seen_through_list_and_watch(serve, peer)
    assert [name for _, name, _ in seen.items] == ["a", "b"]
    assert peer.watches == ["1", "7", "8"]
    assert peer.lists == 1, "a dropped connection is resumed, not re-listed"


async def test_an_error_event_resumes_the_watch(serve: Any) -> None:
    error = {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 500, "reason": "InternalError", "message": "x"},
    }
    peer = Peer([], "1", [[event("ADDED", pod("a", "1", "4")), error], [event("ADDED", pod("b", "2", "5"))]])
    seen = await _seen_through_list_and_watch(serve, peer)
    assert [name for _, name, _ in seen.items] == ["a", "b"]
    assert peer.watches == ["1", "4", "5"]


async def test_an_unserved_kind_lists_empty_and_is_not_watched(serve: Any) -> None:
    peer = Peer([], "1", [])
    informer = Informer(await serve(peer), "/apis/example.com/v1/widgets", "widgets", Seen())
    assert await informer.list() == 0
    assert not informer.served
    await asyncio.wait_for(informer.run(), 1)
    assert peer.watches == []


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"a": [value]}
    return value


async def test_an_object_nested_as_deep_as_the_server_reads_is_read(serve: Any) -> None:
    """A tenant's claim may carry opaque parameters nested about 5 000 levels deep (10 KiB)."""
    wirejson.read_what_the_server_reads()
    deep = {**pod("deep", "9", "11"), "spec": _nested(2600)}
    peer = Peer([deep], "10", [[event("MODIFIED", deep)]])
    seen = await _seen_through_list_and_watch(serve, peer)
    assert seen.items == [("Pod", "deep", False), ("Pod", "deep", False)]


@pytest.mark.parametrize("unreadable", ["not JSON", "too long"])
async def test_an_event_it_cannot_read_lists_again_and_the_watch_goes_on(
    serve: Any, monkeypatch: pytest.MonkeyPatch, unreadable: str
) -> None:
    monkeypatch.setattr(KubeClient, "read_buffer", 2**10)
    line = (
        b"{not JSON" if unreadable == "not JSON" else json.dumps(pod("big", "8", "12" + "0" * 4096)).encode()
    )
    peer = Peer([pod("a", "1")], "10", [[line], [event("ADDED", pod("b", "2", "21"))]])
    seen = Seen()
    informer = Informer(await serve(peer), PATH, "pods", seen, backoff_initial=0.01)
    await informer.list()
    # The same event would come again from where the watch stood: the informer lists instead.
    peer.list_rv = "20"
    await _run_until_idle(informer, peer)
    assert peer.lists == 2
    assert peer.watches == ["10", "20", "21"]
    assert informer.relists == 1
    assert seen.items[-1] == ("Pod", "b", False)


async def test_a_list_page_too_deep_to_read_fails_the_list_instead_of_reading_as_empty(serve: Any) -> None:
    wirejson.read_what_the_server_reads()
    depth = 2 * wirejson.DEEPEST
    deeper = '{"metadata":{"name":"deep","uid":"9"},"spec":' + '{"a":[' * depth + "0" + "]}" * depth + "}"
    peer = Peer([deeper.encode()], "10", [])
    informer = Informer(await serve(peer), PATH, "pods", Seen())
    with pytest.raises(wirejson.TooDeep):
        await informer.list()


async def test_no_failure_ends_the_watch(serve: Any) -> None:
    """A bug that raised out of the informer's task would leave the operator ready and blind."""
    peer = Peer(
        [pod("a", "1")], "10", [[event("ADDED", pod("b", "2", "11"))], [event("ADDED", pod("c", "3", "21"))]]
    )

    class Failing(Seen):
        def __init__(self) -> None:
            super().__init__()
            # Once armed: the watch's event for b, then the re-list's a (the informer lists again).
            self.failures: list[str] = []

        def __call__(self, obj: Mapping[str, Any], deleted: bool) -> None:
            if self.failures and obj["metadata"]["name"] == self.failures[0]:
                raise TypeError(f"a bug, at {self.failures.pop(0)}")
            super().__call__(obj, deleted)

    seen = Failing()
    informer = Informer(await serve(peer), PATH, "pods", seen, backoff_initial=0.01)
    assert await informer.list() == 1
    seen.failures = ["b", "a"]
    peer.list_rv = "20"
    await _run_until_idle(informer, peer)
    assert seen.failures == []
    assert seen.items[-1] == ("Pod", "c", False), "the watch went on after both failures"


async def test_a_relist_that_fails_part_way_forgets_nothing_it_handed_over(serve: Any) -> None:
    """A re-list that fails after some pages has handed their objects over: one of them deleted
    before the next re-list succeeds is still handed over as a deletion."""

    class FailingPage(Peer):
        def _list(self, request: web.Request) -> web.Response:
            if request.query.get("continue") == "2" and self.list_rv == "20":
                # x, created during the gap and handed over on the first page, is deleted meanwhile.
                self.objects, self.list_rv = [pod("a", "1"), pod("y", "4")], "30"
                return web.json_response(
                    {"kind": "Status", "code": 500, "reason": "InternalError", "message": "x"}, status=500
                )
            return super()._list(request)

    peer = FailingPage([pod("a", "1")], "10", [[gone()], 410])
    seen = Seen()
    informer = Informer(await serve(peer), PATH, "pods", seen, backoff_initial=0.01)
    await informer.list()
    peer.objects, peer.list_rv = [pod("a", "1"), pod("x", "3"), pod("y", "4")], "20"
    await _run_until_idle(informer, peer)
    assert ("Pod", "x", False) in seen.items
    assert seen.items[-1] == ("Pod", "x", True), "x was handed over, then deleted"
    assert peer.watches == ["10", "10", "30"]
    assert informer.relists == 2


async def test_a_watch_that_ends_at_once_without_an_event_is_asked_again_after_a_backoff(serve: Any) -> None:
    """A server or proxy that closes every watch as soon as it opens (an API server shutting
    down, a proxy's idle limit) must not be asked again and again without a pause."""
    peer = Peer([], "1", [[], [], []])
    informer = Informer(await serve(peer), PATH, "pods", Seen(), backoff_initial=0.1)
    await informer.list()
    await _run_until_idle(informer, peer)
    assert peer.watches == ["1", "1", "1", "1"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(peer.watched_at)]
    assert min(gaps) >= 0.1, f"watches asked again after {gaps} s"


async def test_a_listing_whose_next_page_expired_lists_again_in_one_request(serve: Any) -> None:
    """A listing slower than etcd keeps its snapshot (minutes: a large cluster, a throttled
    client) gets 410 for its next page; listing again page by page would expire alike."""

    class Expiring(Peer):
        full: int = 0

        def _list(self, request: web.Request) -> web.Response:
            if "limit" not in request.query:
                self.full += 1
            if request.query.get("continue") == "2" and self.list_rv == "10":
                # Meanwhile b was deleted and d created.
                self.objects, self.list_rv = [pod("a", "1"), pod("c", "3"), pod("d", "4")], "11"
                return web.json_response(
                    {"kind": "Status", "code": 410, "reason": "Expired", "message": "continue too old"},
                    status=410,
                )
            return super()._list(request)

    peer = Expiring([pod("a", "1"), pod("b", "2"), pod("c", "3")], "10", [])
    seen = Seen()
    informer = Informer(await serve(peer), PATH, "pods", seen, page_size=2)
    assert await informer.list() == 3
    assert peer.full == 1
    assert informer.resource_version == "11"
    assert seen.items == [
        ("Pod", "a", False),
        ("Pod", "b", False),
        ("Pod", "a", False),
        ("Pod", "c", False),
        ("Pod", "d", False),
        ("Pod", "b", True),
    ], "b, handed over by the expired listing, is deleted"
