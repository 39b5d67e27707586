"""The coexistence probe's cleanup of the probe pods an earlier process left behind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from operators.core.conditions import format_time
from operators.resourceclaim.probe import _remove_earlier_probes

if TYPE_CHECKING:
    from operators.core.runtime import Runtime


class ListingClient:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.deleted: list[str] = []

    async def get(self, path: str, **params: str) -> Any:
        return {"items": self.pods}

    async def delete(self, path: str, uid: str | None = None, **params: str) -> Any:
        self.deleted.append(path.rsplit("/", 1)[-1])
        return {}


class ProbeRuntime:
    def __init__(self, client: ListingClient) -> None:
        self.client = client


def probe_pod(name: str, created: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if created is not None:
        meta["creationTimestamp"] = created
    return {"metadata": meta}


async def test_only_a_probe_another_replica_is_asking_with_right_now_is_kept() -> None:
    now = datetime.now(UTC)
    client = ListingClient(
        [
            probe_pod("asking", format_time(now)),
            probe_pod("asking-elsewhere", (now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S+02:00")),
            probe_pod("left-behind", format_time(now - timedelta(hours=1))),
            probe_pod("no-time", None),
            probe_pod("no-zone", now.strftime("%Y-%m-%dT%H:%M:%S")),
            probe_pod("go-zero", "0001-01-01T00:00:00Z"),
        ]
    )
    await _remove_earlier_probes(cast("Runtime", ProbeRuntime(client)), "dra-system")
    assert client.deleted == ["left-behind", "no-time", "no-zone", "go-zero"]
