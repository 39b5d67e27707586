"""Declared watches: what the runtime finds served of every declared kind before prepare(), which
kinds it watches and at which version, how it follows a served version that changes, and the
background tasks it owns."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from runtime_support import unit_runtime

from operators.core import runtime
from operators.core.client import ApiError
from operators.core.settings import OperatorSettings

GROUP = "example.io"


def discovery(version: str, plurals: list[str]) -> dict[str, Any]:
    return {
        "groupVersion": f"{GROUP}/{version}",
        "resources": [{"name": p, "kind": p.title()} for p in plurals],
    }


class DiscoveryClient:
    def __init__(self, served: dict[str, list[str]]) -> None:
        self.served = served
        self.asked = 0
        self.paths: list[str] = []
        self.asked_often = asyncio.Event()

    async def get(self, path: str, **params: str) -> Any:
        self.asked += 1
        self.paths.append(path)
        if self.asked > 10:
            self.asked_often.set()
        version = path.rsplit("/", 1)[-1]
        if path.startswith(f"/apis/{GROUP}/") and version in self.served:
            return discovery(version, self.served[version])
        raise ApiError(404, "NotFound", path)


class Widgets:
    def __init__(self, serve_gadgets: bool) -> None:
        self.serve_gadgets = serve_gadgets
        self.seen: list[str] = []
        self.prepared = 0

    async def prepare(self) -> bool:
        self.prepared += 1
        return True

    def upsert(self, body: Mapping[str, Any]) -> None:
        self.seen.append(str(body["metadata"]["name"]))

    def delete(self, body: Mapping[str, Any]) -> None:
        self.seen.remove(str(body["metadata"]["name"]))


WATCHES: tuple[runtime.Watch[Widgets], ...] = (
    runtime.Watch(GROUP, "widgets", Widgets.upsert, Widgets.delete, versions=("v2", "v1")),
    runtime.Watch(GROUP, "gadgets", Widgets.upsert, Widgets.delete, when=lambda c: c.serve_gadgets),
    runtime.Watch("", "pods", Widgets.upsert, Widgets.delete),
)


def make_runtime(
    client: DiscoveryClient, controller: Widgets, kinds: tuple[runtime.Kind, ...] = WATCHES
) -> runtime.Runtime:
    made = unit_runtime(client, "watches", OperatorSettings(), kinds=kinds)
    made.controller = controller
    return made


async def test_each_declared_kind_is_watched_at_its_version() -> None:
    made = make_runtime(DiscoveryClient({"v1": ["widgets"], "v2": ["widgets"]}), Widgets(serve_gadgets=True))
    await made.discover()
    kinds = runtime.watched_kinds(WATCHES, made)
    assert [(k.group, k.version, k.plural) for k in kinds] == [
        (GROUP, "v2", "widgets"),
        (GROUP, "v1", "gadgets"),
        ("", "v1", "pods"),
    ], "the first served of the preferred versions, in declaration order"
    assert [k.path for k in kinds] == [
        f"/apis/{GROUP}/v2/widgets",
        f"/apis/{GROUP}/v1/gadgets",
        "/api/v1/pods",
    ]
    kinds[0].apply(made, {"metadata": {"name": "w"}})
    assert made.controller.seen == ["w"]


async def test_a_kind_not_served_or_not_wanted_is_not_watched(caplog: pytest.LogCaptureFixture) -> None:
    made = make_runtime(DiscoveryClient({}), Widgets(serve_gadgets=False))
    await made.discover()
    assert made.served_resource(GROUP, "widgets") is None
    assert [k.plural for k in runtime.watched_kinds(WATCHES, made)] == ["pods"]
    assert "no version of example.io serves widgets (asked for v2, v1): not watched" in caplog.text


async def test_a_bad_object_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    made = make_runtime(DiscoveryClient({}), Widgets(serve_gadgets=False))
    (pods,) = runtime.watched_kinds(WATCHES, made)
    pods.apply(made, {"metadata": {"namespace": "ns", "name": "p"}}, deleted=True)  # never seen: raises
    assert "could not process the deletion of pods ns/p" in caplog.text


async def test_a_newly_served_version_stops_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "REDISCOVERY_SECONDS", 0.0)
    client = DiscoveryClient({"v1": ["widgets"]})
    made = make_runtime(client, Widgets(serve_gadgets=False))
    await made.discover()
    follow = asyncio.ensure_future(runtime.follow_served_version(made, WATCHES[0]))
    await asyncio.wait_for(client.asked_often.wait(), 5)
    assert not follow.done(), "an unchanged version is followed for ever"
    client.served["v2"] = ["widgets"]
    await asyncio.wait_for(follow, 5)
    assert made._stop.is_set()
    assert made.exit_code == 0


async def test_background_tasks_are_kept_logged_and_cancelled(caplog: pytest.LogCaptureFixture) -> None:
    made = make_runtime(DiscoveryClient({}), Widgets(serve_gadgets=False))

    async def fail() -> None:
        raise RuntimeError("boom")

    failing = made.spawn(fail(), "failing")
    endless = made.spawn(asyncio.Event().wait(), "endless")
    await asyncio.wait([failing])
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR):
        assert "background task failing failed" in caplog.text
    await made.stop_background()
    assert endless.cancelled()
    assert not made._background


async def test_only_a_discovered_kind_the_controller_wants_is_followed() -> None:
    optional = runtime.Watch(
        GROUP, "extras", Widgets.upsert, Widgets.delete, versions=("v1",), when=lambda c: c.serve_gadgets
    )
    watches = (*WATCHES, optional)
    wanting = make_runtime(DiscoveryClient({}), Widgets(serve_gadgets=True))
    assert [w.plural for w in runtime.followed_watches(watches, wanting)] == ["widgets", "extras"]
    # Declined (e.g. --workload-claims=off): its API appearing later must not restart anyone.
    declining = make_runtime(DiscoveryClient({}), Widgets(serve_gadgets=False))
    assert [w.plural for w in runtime.followed_watches(watches, declining)] == ["widgets"]


async def test_a_kind_used_without_a_watch_is_discovered_and_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``OperatorDefinition.discovered``: what bindingattacher declares for the DeviceTaintRules it
    writes. Its version is readable before prepare(), and a change of it stops the process."""
    monkeypatch.setattr(runtime, "REDISCOVERY_SECONDS", 0.0)
    used = runtime.Discovered(GROUP, "widgets", ("v2", "v1"))
    client = DiscoveryClient({})
    made = make_runtime(client, Widgets(serve_gadgets=False), (used,))
    await made.discover()
    assert made.served_resource(GROUP, "widgets") is None
    client.served["v1"] = ["widgets"]
    await made.discover()
    served = made.served_resource(GROUP, "widgets")
    assert served is not None
    assert served.version == "v1"
    assert runtime.watched_kinds([], made) == [], "discovered, not watched"
    follow = asyncio.ensure_future(runtime.follow_served_version(made, used))
    client.served["v2"] = ["widgets"]
    await asyncio.wait_for(follow, 5)
    assert made._stop.is_set()


async def test_every_declared_kind_is_found_served_once_per_group_version() -> None:
    """Single-version watches too: a controller reads whether its kind is served from the runtime,
    and the runtime asks each group version once, however many kinds it serves."""
    client = DiscoveryClient({"v1": ["gadgets", "doodads"], "v2": ["widgets"]})
    doodads = runtime.Watch(GROUP, "doodads", Widgets.upsert, Widgets.delete)
    tools = runtime.Discovered(GROUP, "tools", ("v2", "v1"))
    made = make_runtime(client, Widgets(serve_gadgets=True), (*WATCHES, doodads, tools))
    assert await made.discover() == []
    widgets, gadgets = made.served_resource(GROUP, "widgets"), made.served_resource(GROUP, "gadgets")
    assert widgets is not None
    assert widgets.version == "v2"
    assert gadgets is not None
    assert (gadgets.version, gadgets.kind) == ("v1", "Gadgets")
    assert made.served_resource(GROUP, "doodads") is not None
    assert made.served_resource(GROUP, "tools") is None, "served in neither version"
    assert made.served_resource("", "pods") is None, "the fake serves no core group"
    assert sorted(client.paths) == ["/api/v1", f"/apis/{GROUP}/v1", f"/apis/{GROUP}/v2"]


async def test_a_single_version_watch_is_served_only_in_its_version() -> None:
    made = make_runtime(DiscoveryClient({"v2": ["widgets", "gadgets"]}), Widgets(serve_gadgets=True))
    await made.discover()
    assert made.served_resource(GROUP, "gadgets") is None, "gadgets are watched as v1 only"
    assert [k.version for k in runtime.watched_kinds(WATCHES, made) if k.plural == "gadgets"] == ["v1"]


REQUIRED = (
    runtime.Watch(GROUP, "widgets", Widgets.upsert, Widgets.delete, versions=("v2", "v1"), required=True),
    runtime.Watch(GROUP, "gadgets", Widgets.upsert, Widgets.delete, required=True),
    runtime.Watch(GROUP, "extras", Widgets.upsert, Widgets.delete),
)


async def test_a_required_kind_not_served_is_one_reason_and_no_prepare(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = DiscoveryClient({"v1": ["gadgets"]})
    controller = Widgets(serve_gadgets=True)
    made = make_runtime(client, controller, REQUIRED)
    assert not await made.prepare()
    assert controller.prepared == 0, "prepare() waits for the required kinds"
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line == (
        "required APIs are not served: widgets in example.io/v2 or example.io/v1; "
        "not ready, checking again in 30s"
    )
    assert made.health.ready() == (
        False,
        "waiting for: apis-served (not served: widgets in example.io/v2 or example.io/v1)",
    )
    # Not served either, but not required: the controller decides what that means.
    assert made.served_resource(GROUP, "extras") is None

    client.served["v1"].append("widgets")
    assert await made.prepare()
    assert controller.prepared == 1
    assert made.health.gates["apis-served"] is True
    assert made.health.ready() == (True, "ok")


async def test_a_discovered_kind_the_controller_declines_is_not_followed() -> None:
    """devicetaint's PodGroups with --workload-claims=off: discovered, but never a restart."""
    used = runtime.Discovered(GROUP, "widgets", ("v1",), when=lambda c: c.serve_gadgets)
    kinds: tuple[runtime.Kind, ...] = (*WATCHES, used)
    wanting = make_runtime(DiscoveryClient({}), Widgets(serve_gadgets=True), kinds)
    assert [k.plural for k in runtime.followed_watches(kinds, wanting)] == ["widgets", "widgets"]
    declining = make_runtime(DiscoveryClient({}), Widgets(serve_gadgets=False), kinds)
    assert runtime.followed_watches(kinds, declining) == [WATCHES[0]]


def test_no_operator_asks_discovery_itself() -> None:
    """Is it served is the runtime's question (Runtime.discover); kubectl dra, a CLI, may ask."""
    package = Path(runtime.__file__).parents[1]
    askers = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.parent.name not in ("core", "kubectl_dra")
        and re.search(r"\b(find_served|resources_of|served_version_change)\b", path.read_text())
    ]
    assert askers == []


class UnavailableClient(DiscoveryClient):
    """A group version whose APIService does not answer: kube-apiserver's 503, as for an aggregated
    API whose backend is down, or a restarting API server behind a load balancer."""

    def __init__(self, served: dict[str, list[str]], unavailable: set[str]) -> None:
        super().__init__(served)
        self.unavailable = unavailable

    async def get(self, path: str, **params: str) -> Any:
        if path.rsplit("/", 1)[-1] in self.unavailable:
            self.asked += 1
            if self.asked > 10:
                self.asked_often.set()
            raise ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
        return await super().get(path, **params)


async def test_an_unavailable_group_version_is_not_taken_for_unserved() -> None:
    """A 503 says nothing about what is served: the older version must not be chosen instead."""
    made = make_runtime(
        UnavailableClient({"v2": ["widgets"], "v1": ["widgets"]}, {"v2"}), Widgets(serve_gadgets=False)
    )
    with pytest.raises(ApiError):
        await made.discover()


async def test_an_unavailable_group_version_never_stops_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "REDISCOVERY_SECONDS", 0.0)
    client = UnavailableClient({"v2": ["widgets"], "v1": ["widgets"]}, set())
    made = make_runtime(client, Widgets(serve_gadgets=False))
    await made.discover()
    client.unavailable.add("v2")
    follow = asyncio.ensure_future(runtime.follow_served_version(made, WATCHES[0]))
    asked = asyncio.ensure_future(client.asked_often.wait())
    await asyncio.wait_for(asyncio.wait((follow, asked), return_when=asyncio.FIRST_COMPLETED), 5)
    follow.cancel()
    asked.cancel()
    assert not made._stop.is_set(), "a version that does not answer is still the one served"
