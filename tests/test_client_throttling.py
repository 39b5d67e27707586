"""Which 429 the client retries: "busy" (API Priority and Fairness) yes, a refusal no."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from operators.core.client import ApiError, KubeClient

BUDGET_REFUSAL = {
    "kind": "Status",
    "status": "Failure",
    "reason": "TooManyRequests",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "details": {
        "causes": [
            {"reason": "DisruptionBudget", "message": "The disruption budget pdb needs 1 healthy pods"}
        ]
    },
    "code": 429,
}
BUSY = {"kind": "Status", "reason": "TooManyRequests", "message": "Too many requests", "code": 429}


class Server:
    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, Any]]] = []
        self.requests = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        status, body = self.answers.pop(0) if self.answers else (201, {"kind": "Eviction"})
        return web.json_response(body, status=status, headers={"Retry-After": "0"})


@pytest.fixture
async def served() -> AsyncIterator[tuple[Server, KubeClient]]:
    server = Server()
    app = web.Application()
    app.router.add_post("/api/v1/namespaces/ns/pods/p/eviction", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    client = KubeClient(configuration, qps=0, burst=100)
    try:
        yield server, client
    finally:
        await client.close()
        await runner.cleanup()


async def evict(client: KubeClient) -> Any:
    return await client.create("/api/v1/namespaces/ns/pods/p/eviction", {"kind": "Eviction"})


async def test_a_budget_refusal_reaches_the_caller_at_once(served: tuple[Server, KubeClient]) -> None:
    server, client = served
    server.answers = [(429, BUDGET_REFUSAL)] * 3
    with pytest.raises(ApiError) as raised:
        await evict(client)
    assert raised.value.status == 429
    assert not raised.value.busy
    assert server.requests == 1


async def test_a_busy_server_is_asked_again(served: tuple[Server, KubeClient]) -> None:
    server, client = served
    server.answers = [(429, BUSY), (429, BUSY)]
    assert await evict(client) == {"kind": "Eviction"}
    assert server.requests == 3
