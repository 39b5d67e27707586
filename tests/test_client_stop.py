"""A stopping operator does not sleep through its grace period waiting for a token."""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes_asyncio import client as k8s_client

from operators.core.client import ApiError, KubeClient


async def test_waiting_for_a_token_ends_when_the_operator_stops() -> None:
    configuration = k8s_client.Configuration()
    configuration.host = "https://127.0.0.1:9"
    client = KubeClient(configuration, qps=0.1, burst=1)
    try:
        client.bucket.reserve()  # the only token: the next request waits 10 s for another
        asyncio.get_running_loop().call_later(0.1, client.stop_waiting)
        started = time.monotonic()
        with pytest.raises(ApiError) as raised:
            await client.get("/version")
        assert raised.value.reason == "ShuttingDown"
        assert time.monotonic() - started < 5
        assert client.sibling()._stopping.is_set(), "siblings stop waiting too"
    finally:
        await client.close()


async def test_a_sibling_for_the_last_writes_outlives_the_stop() -> None:
    configuration = k8s_client.Configuration()
    configuration.host = "https://127.0.0.1:9"
    client = KubeClient(configuration, qps=0.1, burst=1)
    try:
        client.stop_waiting()
        releaser = client.sibling(outlives_stop=True)
        assert not releaser._stopping.is_set()
        # Sent, not refused: port 9 answers nothing, so the transport fails (status 0).
        with pytest.raises(ApiError) as raised:
            await releaser.get("/version")
        assert raised.value.reason != "ShuttingDown"
    finally:
        await client.close()
