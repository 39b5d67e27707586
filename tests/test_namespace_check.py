"""The operator's own namespace: the decisions (pure), the state the operators read, and the
runtime's wiring against a fake API server: not ready while the namespace is missing, one line that
says what to create, ready once it appears, and no Lease attempt before."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubeconfigs import local_api_server

from operators.core import namespace as own_namespace
from operators.core import runtime
from operators.core.namespace import NamespaceState, Presence, announcement, presence, problem
from operators.core.settings import OperatorSettings

PURPOSE = "the DeviceAttachment ledger"


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (200, {"status": {"phase": "Active"}}, Presence.PRESENT),
        (200, {"status": {"phase": "Terminating"}}, Presence.TERMINATING),
        (404, None, Presence.MISSING),
        (403, None, Presence.UNKNOWABLE),
        (401, None, None),
        (500, None, None),
        (0, None, None),
    ],
)
def test_presence(status: int, body: dict[str, Any] | None, expected: Presence | None) -> None:
    assert presence(status, body) is expected


def test_only_present_or_unknowable_is_usable() -> None:
    assert {p for p in Presence if p.usable} == {Presence.PRESENT, Presence.UNKNOWABLE}


def test_the_problem_says_what_to_create_or_which_namespace_to_pass() -> None:
    missing = problem("dra-operators", Presence.MISSING, PURPOSE)
    assert missing is not None
    assert missing.reason == "NamespaceMissing"
    assert missing.message == (
        'namespace "dra-operators" does not exist (it holds the DeviceAttachment ledger): create it with '
        '"kubectl create namespace dra-operators" or "kubectl apply -k manifests/", '
        "or pass --namespace with an existing namespace"
    )
    terminating = problem("dra-operators", Presence.TERMINATING, PURPOSE)
    assert terminating is not None
    assert terminating.reason == "NamespaceTerminating"
    assert "--namespace" in terminating.message
    for fine in (Presence.PRESENT, Presence.UNKNOWABLE, Presence.UNCHECKED):
        assert problem("dra-operators", fine, PURPOSE) is None


def test_announcements_are_made_on_changes_only() -> None:
    said = announcement("ns", Presence.UNCHECKED, Presence.MISSING, PURPOSE)
    assert said is not None
    assert said[0] == logging.WARNING
    assert said[1].startswith('namespace "ns" does not exist')
    assert said[1].endswith("; not ready, checking again every 10s")
    assert "\n" not in said[1]
    assert announcement("ns", Presence.MISSING, Presence.MISSING, PURPOSE) is None
    assert announcement("ns", Presence.UNCHECKED, Presence.PRESENT, PURPOSE) is None  # the normal start
    assert announcement("ns", Presence.MISSING, Presence.PRESENT, PURPOSE) == (
        logging.INFO,
        'namespace "ns" exists now',
    )
    forbidden = announcement("ns", Presence.UNCHECKED, Presence.UNKNOWABLE, PURPOSE)
    assert forbidden is not None
    assert forbidden[0] == logging.INFO


async def test_state_tells_listeners_of_changes() -> None:
    state = NamespaceState("ns", PURPOSE)
    heard: list[Presence] = []
    state.subscribe(lambda: heard.append(state.presence))
    assert state.problem is None  # not known yet: nothing to report
    assert not state.update(None)
    assert state.update(Presence.MISSING)
    assert state.problem is not None
    assert not state.update(Presence.MISSING)
    assert not state.update(None)  # a failed check keeps the last answer
    waiter = asyncio.ensure_future(state.wait_usable())
    await asyncio.sleep(0)
    assert not waiter.done()
    assert state.update(Presence.PRESENT)
    await asyncio.wait_for(waiter, 1)
    assert heard == [Presence.MISSING, Presence.PRESENT]
    assert state.problem is None


def definition(namespace_use: str = PURPOSE, make: Any = None) -> runtime.OperatorDefinition:
    return runtime.OperatorDefinition(
        name="nstest",
        settings_class=OperatorSettings,
        default_workers=1,
        make_controller=make or (lambda _: NeverPrepared()),
        namespace_use=namespace_use,
    )


def test_which_operators_check_their_namespace() -> None:
    alone = OperatorSettings()
    electing = OperatorSettings(leader_elect=True)
    assert runtime.namespace_purpose(definition(""), alone) == ""
    assert runtime.namespace_purpose(definition(""), electing) == "the leader-election Lease"
    assert runtime.namespace_purpose(definition(), alone) == PURPOSE
    assert runtime.namespace_purpose(definition(), electing) == f"{PURPOSE} and the leader-election Lease"


class NeverPrepared:
    async def prepare(self) -> bool:
        return False

    async def sync(self, key: Any) -> None:
        raise AssertionError("no sync without prepare")


class FakeApi:
    def __init__(self) -> None:
        self.namespace_exists = False
        self.paths: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.paths.append(request.path)
        if request.path == "/api/v1/namespaces/dra-operators":
            if self.namespace_exists:
                return web.json_response({"kind": "Namespace", "status": {"phase": "Active"}})
            return web.json_response(
                {"kind": "Status", "reason": "NotFound", "message": 'namespaces "dra-operators" not found'},
                status=404,
            )
        if request.path == "/version":
            return web.json_response({"major": "1", "minor": "37"})
        return web.json_response({"kind": "Status", "reason": "NotFound"}, status=404)


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[FakeApi, str]]:
    fake = FakeApi()
    async with local_api_server(fake.handle, tmp_path) as config:
        yield fake, config


def settings_for(config: str, **values: Any) -> OperatorSettings:
    return OperatorSettings(
        kubeconfig=config,
        namespace="dra-operators",
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
        metrics_secure=False,
        **values,
    )


async def until(condition: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_not_ready_until_the_namespace_exists(
    api: tuple[FakeApi, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake, config = api
    monkeypatch.setattr(own_namespace, "CHECK_SECONDS", 0.05)
    seen: list[runtime.Runtime] = []

    def make(rt: runtime.Runtime) -> NeverPrepared:
        seen.append(rt)
        return NeverPrepared()

    stop = asyncio.Event()
    caplog.set_level(logging.INFO)
    task = asyncio.create_task(
        runtime.run(definition(make=make), settings_for(config), stop=stop, configure_logging=False)
    )
    try:
        await until(lambda: bool(seen))
        rt = seen[0]
        assert rt.own_namespace is not None
        assert rt.own_namespace.presence is Presence.MISSING
        assert rt.health.gates["namespace"] is False
        assert "namespace" in rt.health.ready()[1]
        warnings = [r.getMessage() for r in caplog.records if r.name == own_namespace.__name__]
        assert len(warnings) == 1
        assert warnings[0].startswith('namespace "dra-operators" does not exist (it holds')
        fake.namespace_exists = True
        await until(lambda: rt.health.gates["namespace"] is True)
        assert rt.own_namespace.problem is None
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 10) == 0


async def test_no_lease_is_sought_before_the_namespace_exists(
    api: tuple[FakeApi, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, config = api
    monkeypatch.setattr(own_namespace, "CHECK_SECONDS", 0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(
        runtime.run(
            definition(""), settings_for(config, leader_elect=True), stop=stop, configure_logging=False
        )
    )
    await until(lambda: fake.paths.count("/api/v1/namespaces/dra-operators") >= 3)
    stop.set()
    assert await asyncio.wait_for(task, 10) == 0
    assert not [p for p in fake.paths if "leases" in p]
