"""The write fence holds for a write that was already waiting for a token when it closed."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client as k8s_client

from operators.core.client import ApiError, KubeClient
from operators.core.ratelimit import TokenBucket


class CountedBucket(TokenBucket):
    reserved = 0

    def reserve(self) -> float:
        self.reserved += 1
        return super().reserve()


async def test_a_write_waiting_for_a_token_when_the_fence_closes_is_not_sent() -> None:
    configuration = k8s_client.Configuration()
    configuration.host = "https://127.0.0.1:9"  # nothing answers: a write sent fails in the transport
    client = KubeClient(configuration)
    bucket = client.bucket = CountedBucket(qps=4, burst=1)
    try:
        bucket.reserve()  # the only token: the next request waits a quarter of a second for one
        write = asyncio.create_task(client.create("/api/v1/namespaces/ns/pods", {"kind": "Pod"}))
        deadline = asyncio.get_running_loop().time() + 5
        while bucket.reserved < 2:
            assert asyncio.get_running_loop().time() < deadline, "the write never asked for a token"
            await asyncio.sleep(0.01)
        client.fence.close("the Lease is lost")
        with pytest.raises(ApiError) as raised:
            await write
        assert raised.value.reason == "WriteRefused"
    finally:
        await client.close()
