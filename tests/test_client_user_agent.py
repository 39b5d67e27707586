"""Every request carries the operator's user agent: kube-apiserver records a write without a
field manager under the agent's first part, so the operators' creates and updates show as
``dra-operators-<operator>`` in managedFields (found by the managed-profile tier: they showed
as ``Python``, aiohttp's default)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from operators.core.client import KubeClient

pytestmark = pytest.mark.unit


@pytest.fixture
async def echo() -> AsyncIterator[tuple[KubeClient, list[str]]]:
    agents: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        agents.append(request.headers.get("User-Agent", ""))
        if request.query.get("watch") == "true":
            response = web.StreamResponse()
            await response.prepare(request)
            await response.write(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"2"}}}\n')
            await response.write_eof()
            return response
        return web.json_response({"kind": "Status"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{runner.addresses[0][1]}"
    client = KubeClient(configuration, qps=0, user_agent="dra-operators-resourceclaim/pod-1")
    yield client, agents
    await client.close()
    await runner.cleanup()


async def test_requests_and_watches_carry_the_operators_agent(echo: tuple[KubeClient, list[str]]) -> None:
    client, agents = echo
    await client.create("/api/v1/namespaces/ns/pods", {"kind": "Pod"})
    await client.sibling().get("/api/v1/pods")
    lines = [line async for line in client.watch_lines("/api/v1/pods", {"resourceVersion": "1"}, 5)]
    assert len(lines) == 1
    assert agents == ["dra-operators-resourceclaim/pod-1"] * 3
