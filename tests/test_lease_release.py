from __future__ import annotations

from typing import Any

import pytest

from operators.core.client import ApiError
from operators.core.runtime import release_lease

pytestmark = pytest.mark.unit


class Leases:
    def __init__(self, holder: str) -> None:
        self.lease: dict[str, Any] = {
            "metadata": {"name": "l", "resourceVersion": "7"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 2},
        }
        self.replaced: list[dict[str, Any]] = []

    async def get(self, path: str) -> dict[str, Any]:
        return self.lease

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.replaced.append(body)
        return body


async def test_a_held_lease_is_released_with_its_resource_version() -> None:
    leases = Leases("me")
    await release_lease(leases, "ns", "l", "me")  # type: ignore[arg-type]
    (body,) = leases.replaced
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["spec"]["holderIdentity"] is None
    assert body["spec"]["leaseDurationSeconds"] == 1
    assert body["spec"]["leaseTransitions"] == 2


async def test_someone_elses_lease_is_left_alone() -> None:
    leases = Leases("other")
    await release_lease(leases, "ns", "l", "me")  # type: ignore[arg-type]
    assert leases.replaced == []


async def test_a_conflict_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    class Conflicting(Leases):
        async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
            raise ApiError(409, "Conflict", "the object has been modified")

    await release_lease(Conflicting("me"), "ns", "l", "me")  # type: ignore[arg-type]
    assert "could not release the Lease ns/l" in caplog.text
