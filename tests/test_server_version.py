"""Kubernetes older than 1.35 is refused, by every operator and by ``kubectl dra``, with one line.

The reading of ``/version`` is pure (:mod:`operators.core.serverversion`); the operators' runtime
logs the line once, stays live, answers readiness with it and starts no controller; the plugin
prints it and exits 1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubeconfigs import empty_kubeconfig, local_api_server

from operators.core import runtime
from operators.core.health import Health
from operators.core.serverversion import parse_server_version, refusal
from operators.core.settings import OperatorSettings
from operators.kubectl_dra import cli
from operators.kubectl_dra.session import Session

REFUSED_1_34 = (
    "Kubernetes v1.34.4 is not supported: dra-operators needs 1.35 or later "
    "(docs: docs/install.md, Supported Kubernetes versions)"
)


@pytest.mark.parametrize(
    ("document", "numbers", "shown"),
    [
        ({"gitVersion": "v1.35.4", "major": "1", "minor": "35"}, (1, 35), "v1.35.4"),
        ({"gitVersion": "v1.36.0-rc.1"}, (1, 36), "v1.36.0-rc.1"),
        ({"gitVersion": "v1.35.4-eks-abc1234", "minor": "35+"}, (1, 35), "v1.35.4-eks-abc1234"),
        ({"gitVersion": "v1.35.4+k3s1"}, (1, 35), "v1.35.4+k3s1"),
        ({"gitVersion": "v1.37.2"}, (1, 37), "v1.37.2"),
        ({"gitVersion": "v2.0.0"}, (2, 0), "v2.0.0"),
        ({"gitVersion": "v1.34.4"}, (1, 34), "v1.34.4"),
        # Without a readable gitVersion, major and minor (a trailing + as some providers write it).
        ({"major": "1", "minor": "37"}, (1, 37), "v1.37"),
        ({"gitVersion": "v0.0.0-master+$Format:%H$", "major": "1", "minor": "33+"}, (1, 33), "v1.33"),
        ({"gitVersion": "custom-build", "major": "1", "minor": "36"}, (1, 36), "custom-build"),
    ],
)
def test_the_version_is_read_from_every_form_servers_use(
    document: dict[str, str], numbers: tuple[int, int], shown: str
) -> None:
    version = parse_server_version(document)
    assert version is not None
    assert (version.major, version.minor, version.shown) == (*numbers, shown)


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"gitVersion": "devel"},
        {"major": "1", "minor": "x"},
        # A build without a release version, as kube-apiserver reports one built from a plain checkout.
        {"gitVersion": "v0.0.0-master+$Format:%H$", "major": "", "minor": ""},
    ],
)
def test_an_unreadable_version_refuses_nothing(document: dict[str, str]) -> None:
    assert parse_server_version(document) is None
    assert refusal(document) is None


@pytest.mark.parametrize(
    ("git_version", "refused"),
    [
        ("v1.34.4", True),
        ("v1.34.99-gke.1200", True),
        ("v1.30.0", True),
        ("v1.35.0", False),
        ("v1.35.0-alpha.0", False),
        ("v1.36.3", False),
        ("v1.37.2", False),
        ("v1.40.0", False),
        ("v2.0.0", False),
    ],
)
def test_older_than_1_35_is_refused(git_version: str, refused: bool) -> None:
    assert (refusal({"gitVersion": git_version}) is not None) is refused


def test_the_refusal_is_one_line_naming_the_version_the_minimum_and_the_docs() -> None:
    assert refusal({"gitVersion": "v1.34.4", "major": "1", "minor": "34"}) == REFUSED_1_34


# --- The operators -----------------------------------------------------------------------------------


class FakeApi:
    def __init__(self, version: dict[str, str]) -> None:
        self.version = version
        self.paths: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.paths.append(request.path)
        if request.path == "/version":
            return web.json_response(self.version)
        return web.json_response({"kind": "Status", "reason": "NotFound"}, status=404)


@pytest.fixture
async def old_cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeApi, str]]:
    fake = FakeApi({"major": "1", "minor": "34", "gitVersion": "v1.34.4"})
    async with local_api_server(fake.handle, tmp_path) as config:
        yield fake, config


class Unprepared:
    async def prepare(self) -> bool:
        return False

    async def sync(self, key: Any) -> None:
        raise AssertionError("no sync on a refused cluster")


async def test_an_operator_on_1_34_refuses_once_and_stays_live_but_not_ready(
    old_cluster: tuple[FakeApi, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake, config = old_cluster
    healths: list[Health] = []

    class Recorded(Health):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            healths.append(self)

    def make(_: runtime.Runtime) -> Unprepared:
        raise AssertionError("no controller is made on a refused cluster")

    monkeypatch.setattr(runtime, "Health", Recorded)
    definition = runtime.OperatorDefinition(
        name="versiontest", settings_class=OperatorSettings, default_workers=1, make_controller=make
    )
    settings = OperatorSettings(
        kubeconfig=config,
        namespace="dra-operators",
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
        metrics_secure=False,
        leader_elect=True,
    )
    stop = asyncio.Event()
    with caplog.at_level(logging.INFO):
        running = asyncio.ensure_future(runtime.run(definition, settings, stop=stop, configure_logging=False))
        deadline = asyncio.get_running_loop().time() + 5
        while not (healths and healths[0].refused):
            assert asyncio.get_running_loop().time() < deadline, "never refused"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert not running.done(), "refusing is no exit: the kubelet would restart it into a crash loop"
        (health,) = healths
        assert health.ready() == (False, REFUSED_1_34)
        assert health.alive() == (True, "ok")
        stop.set()
        assert await asyncio.wait_for(running, 10) == 0
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [REFUSED_1_34]
    assert fake.paths.count("/version") == 1, "read once at start (the liveness ping waits 10 s)"
    assert not [p for p in fake.paths if "leases" in p or "namespaces" in p], fake.paths


async def test_a_supported_cluster_goes_on_to_start(tmp_path: Path) -> None:
    fake = FakeApi({"major": "1", "minor": "35", "gitVersion": "v1.35.4"})
    prepared = asyncio.Event()

    class Waiting(Unprepared):
        async def prepare(self) -> bool:
            prepared.set()
            return False

    definition = runtime.OperatorDefinition(
        name="versiontest",
        settings_class=OperatorSettings,
        default_workers=1,
        make_controller=lambda _: Waiting(),
    )
    stop = asyncio.Event()
    async with local_api_server(fake.handle, tmp_path) as config:
        settings = OperatorSettings(
            kubeconfig=config,
            metrics_bind_address="127.0.0.1:0",
            health_probe_bind_address="127.0.0.1:0",
            metrics_secure=False,
        )
        running = asyncio.ensure_future(runtime.run(definition, settings, stop=stop, configure_logging=False))
        await asyncio.wait_for(prepared.wait(), 5)
        stop.set()
        assert await asyncio.wait_for(running, 10) == 0


# --- kubectl dra -------------------------------------------------------------------------------------


class VersionClient:
    server = "https://fake.invalid"

    def __init__(self, version: dict[str, str]) -> None:
        self.version = version
        self.asked: list[str] = []

    async def get(self, path: str, **params: str) -> Any:
        self.asked.append(path)
        if path == "/version":
            return self.version
        return {"resources": [], "items": [], "metadata": {}}

    async def close(self) -> None:
        pass


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    return empty_kubeconfig(tmp_path)


def connect_to(monkeypatch: pytest.MonkeyPatch, client: VersionClient) -> None:
    async def connect(cls: type[Session], path: str, context: str | None) -> Session:
        return cls(client)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "connect", classmethod(connect))


@pytest.mark.parametrize(
    "argv",
    [
        ["pools"],
        ["taint-preview", "driver=gpu.example.com"],
        ["explain", "claim", "c", "--namespace", "ns"],
    ],
)
def test_kubectl_dra_on_1_34_prints_the_line_and_exits_1(
    argv: list[str],
    kubeconfig: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = VersionClient({"major": "1", "minor": "34", "gitVersion": "v1.34.4"})
    connect_to(monkeypatch, client)
    assert cli.main([*argv, "--kubeconfig", kubeconfig]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: {REFUSED_1_34}\n"
    assert captured.out == ""
    assert client.asked == ["/version"], "nothing else is asked of a refused cluster"


def test_kubectl_dra_on_1_35_goes_on(
    kubeconfig: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client = VersionClient({"major": "1", "minor": "35", "gitVersion": "v1.35.4"})
    connect_to(monkeypatch, client)
    assert cli.main(["pools", "--kubeconfig", kubeconfig]) == 1  # no pool status API in this fake
    assert "not supported" not in capsys.readouterr().err
    assert client.asked[0] == "/version"
    assert len(client.asked) > 1
