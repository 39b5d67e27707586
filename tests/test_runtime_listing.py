"""The runtime's own initial listing: every page is fed to the cache before the queue opens,
unserved kinds are empty, and objects that vanish before the watch starts are forgotten."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from operators.core import runtime
from operators.core.client import ApiError, KubeClient
from operators.core.coexistence import Guard
from operators.core.models import Tombstone


class PagedClient:
    def __init__(self, pages: dict[str, list[dict[str, Any]]]) -> None:
        self.pages = pages
        self.calls: list[tuple[str, dict[str, str]]] = []

    async def get(self, path: str, **params: str) -> Any:
        self.calls.append((path, params))
        if path not in self.pages:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        pages = self.pages[path]
        index = int(params.get("continue", "0"))
        page = pages[index]
        meta = {"continue": str(index + 1)} if index + 1 < len(pages) else {}
        return {
            "apiVersion": "v1",
            "kind": "PodList",
            "metadata": meta,
            "items": [dict(i) for i in page["items"]],
        }

    list_metadata = get


class Recorder:
    def __init__(self) -> None:
        self.upserts: list[str] = []
        self.deletes: list[str] = []
        self.deleted_bodies: list[Mapping[str, Any]] = []


def _pod(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid}, "spec": {"nodeName": "n"}}


def _kind(plural: str = "pods") -> runtime.WatchedKind:
    def upsert(controller: Recorder, body: Mapping[str, Any]) -> None:
        if body["metadata"]["name"] == "broken":
            raise ValueError("odd input")
        controller.upserts.append(f"{body['kind']}/{body['metadata']['name']}")

    def delete(controller: Recorder, body: Mapping[str, Any]) -> None:
        controller.deletes.append(body["metadata"]["uid"])
        controller.deleted_bodies.append(body)

    (kind,) = runtime.watched_kinds(
        [runtime.Watch("", plural, upsert, delete)], _runtime(PagedClient({}), Recorder())
    )
    return kind


def _runtime(client: PagedClient, controller: Recorder) -> runtime.Runtime:
    guard = Guard(None, datetime.now(UTC), lambda _: None)
    fields = {"reader": cast(KubeClient, client), "controller": controller, "guard": guard}
    return cast(runtime.Runtime, type("R", (), fields)())


async def test_initial_listing_reads_every_page_and_skips_bad_objects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kind = _kind()
    client = PagedClient(
        {
            "/api/v1/pods": [
                {"items": [_pod("a", "1"), _pod("broken", "2")]},
                {"items": [_pod("c", "3")]},
            ]
        }
    )
    controller = Recorder()
    listed = await runtime._initial_listing(_runtime(client, controller), [kind])
    assert controller.upserts == ["Pod/a", "Pod/c"], (
        "items get their kind from the list, bad ones are skipped"
    )
    assert set(listed[kind]) == {"1", "2", "3"}
    assert [params.get("continue") for _, params in client.calls] == [None, "1"]
    assert "could not process pods ns/broken" in caplog.text


async def test_unserved_kind_lists_as_empty() -> None:
    kind = _kind("widgets")
    controller = Recorder()
    listed = await runtime._initial_listing(_runtime(PagedClient({}), controller), [kind])
    assert listed == {kind: {}}
    assert controller.upserts == []


async def test_objects_gone_before_the_watch_are_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "RELIST_DELAY_SECONDS", 0)
    kind = _kind()
    controller = Recorder()
    client = PagedClient({"/api/v1/pods": [{"items": [_pod("a", "1"), _pod("b", "2")]}]})
    listed = await runtime._initial_listing(_runtime(client, controller), [kind])
    client.pages["/api/v1/pods"] = [{"items": [_pod("b", "2"), _pod("new", "9")]}]
    await asyncio.wait_for(runtime._forget_vanished(_runtime(client, controller), listed), 5)
    assert controller.deletes == ["1"], "only what was listed first and is gone now is forgotten"
    [gone] = controller.deleted_bodies
    assert isinstance(gone, Tombstone), "its final state is unknown: the controller reads what it cached"
    assert "spec" not in gone
    assert listed == {}


async def test_kinds_listed_empty_are_not_listed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "RELIST_DELAY_SECONDS", 0)
    pods, claims = _kind(), _kind("claims")
    controller = Recorder()
    client = PagedClient({"/api/v1/pods": [{"items": []}], "/api/v1/claims": [{"items": [_pod("a", "1")]}]})
    listed = await runtime._initial_listing(_runtime(client, controller), [pods, claims])
    client.calls.clear()
    client.pages["/api/v1/pods"] = [{"items": [_pod("burst", "7")]}]
    await asyncio.wait_for(runtime._forget_vanished(_runtime(client, controller), listed), 5)
    assert [path for path, _ in client.calls] == ["/api/v1/claims"], "nothing listed, nothing can vanish"
    assert controller.deletes == []
