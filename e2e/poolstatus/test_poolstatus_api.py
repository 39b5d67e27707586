"""What the API server itself enforces on requests (spec poolstatus.md sections 4 and 5).

The project CRD must reject what the built-in type rejects: malformed specs on create, any
spec change, and any change or removal of a written status. No operator runs here; the test
writes statuses itself, as another controller would. This also proves that the CRD, with
its nested map-list and CEL rules, is accepted by a 1.37 API server (C7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devcluster.kube import ApiError, Kube
from e2e import harness
from e2e.poolstatus.support import (
    BUILTIN,
    PROJECT,
    SURFACES,
    RequestTracker,
    complete,
    request_body,
)

pytestmark = pytest.mark.timeout(120)

STATUS = {
    "poolCount": 0,
    "conditions": [{**complete(0), "lastTransitionTime": "2026-09-01T10:00:00Z"}],
}


def _rejected(call: Callable[..., Any], *args: Any) -> str:
    with pytest.raises(ApiError) as info:
        call(*args)
    assert info.value.status == 422, info.value
    return info.value.message


def _status_patch(api: Kube, path: str, status: dict[str, Any] | None) -> Any:
    return api.patch(f"{path}/status", {"status": status})


def test_create_validation_of_the_crd(
    api: Kube, unique_name: Callable[[str], str], requests: RequestTracker
) -> None:
    """Vector 83: malformed specs are refused with a message naming the field."""
    long_domain = "a" * 64 + "/b"
    long_name = "a.com/" + "b" * 33
    refused: list[tuple[dict[str, Any], str]] = [
        ({"driver": ""}, "spec.driver"),
        ({"driver": "invalid driver!"}, "spec.driver"),
        ({"driver": "example.com/gpu"}, "spec.driver"),  # the seed's own example is not a driver name
        ({"driver": "x.com", "poolName": ""}, "spec.poolName"),
        ({"driver": "x.com", "poolName": "invalid pool!"}, "spec.poolName"),
        ({"driver": "x.com", "limit": 0}, "spec.limit"),
        ({"driver": "x.com", "limit": -1}, "spec.limit"),
        ({"driver": "x.com", "limit": 1001}, "spec.limit"),
        (
            {"driver": "x.com", "defaultPartitionTypeAttribute": "profile"},
            "spec.defaultPartitionTypeAttribute",
        ),
        (
            {"driver": "x.com", "defaultPartitionTypeAttribute": "invalid attr!"},
            "defaultPartitionTypeAttribute",
        ),
        ({"driver": "x.com", "defaultPartitionTypeAttribute": "a.com/b/c"}, "defaultPartitionTypeAttribute"),
        ({"driver": "x.com", "defaultPartitionTypeAttribute": long_domain}, "at most 63 characters"),
        ({"driver": "x.com", "defaultPartitionTypeAttribute": long_name}, "at most 32 characters"),
        ({"limit": 5}, "spec.driver: Required value"),
    ]
    for spec, expected in refused:
        body = request_body(PROJECT, unique_name("bad"), "x")
        body["spec"] = spec
        message = _rejected(api.create, PROJECT.path(), body)
        assert expected in message, (spec, message)

    accepted = [
        {"driver": "GPU.Example.com"},
        {"driver": "x.com", "poolName": "a/b.c"},
        {"driver": "x.com", "defaultPartitionTypeAttribute": "gpu.example.com/profile"},
    ]
    for spec in accepted:
        requests.create(PROJECT, unique_name("ok"), **spec)
    name = unique_name("defaults")
    body = request_body(PROJECT, name, "x.com")
    body["status"] = STATUS
    created = api.create(PROJECT.path(), body)
    requests.created.append(PROJECT.path(name))
    assert created["spec"]["limit"] == 100
    assert "status" not in created  # the status subresource drops it on create


def test_spec_is_immutable_and_status_is_write_once(
    cluster: harness.Cluster, api: Kube, unique_name: Callable[[str], str], requests: RequestTracker
) -> None:
    """Vector 84 on both surfaces: changing the spec is rejected, metadata stays mutable, the
    first status write is accepted, a different one and its removal are rejected."""
    name = unique_name("immutable")
    for surface in SURFACES:
        requests.create(surface, name, "gpu.example.com")
        path = surface.path(name)
        for change in ({"limit": 5}, {"poolName": "p"}, {"driver": "other.example.com"}):
            message = _rejected(api.patch, path, {"spec": change})
            assert "field is immutable" in message, message
        # The user-facing command fails the same way.
        kubectl = cluster.kubectl(
            "patch", surface.kubectl_resource, name, "--type=merge", "-p", '{"spec":{"limit":7}}', check=False
        )
        assert kubectl.returncode != 0
        assert "field is immutable" in kubectl.stderr
        api.patch(path, {"metadata": {"labels": {"team": "a"}}})

        # Status: the main endpoint ignores it; the first /status write sticks.
        api.patch(path, {"status": STATUS})
        assert "status" not in api.get(path)
        _status_patch(api, path, STATUS)
        assert api.get(path)["status"]["poolCount"] == 0
        _status_patch(api, path, STATUS)  # identical: accepted as a no-op
        message = _rejected(_status_patch, api, path, {**STATUS, "poolCount": 1})
        assert "field is immutable" in message, message
        if surface is PROJECT:
            message = _rejected(_status_patch, api, path, None)
            assert "status cannot be removed once set" in message, message


def test_status_validation_of_the_crd(
    api: Kube, unique_name: Callable[[str], str], requests: RequestTracker
) -> None:
    """Vector 84g: the CRD validates a status as the built-in type does, except that it accepts
    generation 0 (which the built-in type rejects as Required: C1)."""
    pool = {"driver": "x.com", "poolName": "p", "generation": 1}
    bad_status: list[dict[str, Any]] = [
        {"pools": [pool]},  # poolCount missing
        {"poolCount": 1, "pools": [{**pool, "driver": ""}]},
        {"poolCount": 1, "pools": [{**pool, "totalDevices": -1}]},
        {"poolCount": 1, "pools": [{**pool, "resourceSliceCount": 0}]},
        {"poolCount": 1, "pools": [{**pool, "validationError": "a" * 257}]},
        {"poolCount": 1, "pools": [{**pool, "validationError": "é" * 129}]},
        {
            "poolCount": 1,
            "pools": [
                {
                    **pool,
                    "partitionSummary": [
                        {"attribute": "x.com/p", "type": "A", "total": 1, "allocatable": 1},
                        {"attribute": "x.com/p", "type": "A", "total": 2, "allocatable": 0},
                    ],
                }
            ],
        },
        {"poolCount": 1, "pools": [{**pool, "shareableSummary": {"fullyAvailableDevices": 1}}]},
    ]
    for status in bad_status:
        name = unique_name("status")
        requests.create(PROJECT, name, "x.com")
        _rejected(_status_patch, api, PROJECT.path(name), status)

    good = {
        "poolCount": 1,
        "pools": [
            {
                **pool,
                "generation": 0,
                "validationError": "é" * 128,
                "shareableSummary": {
                    "fullyAvailableDevices": 1,
                    "partiallyAvailableDevices": 0,
                    "capacity": [
                        {"name": "bandwidth", "total": "10Gi", "consumed": "0", "available": "10Gi"}
                    ],
                },
            }
        ],
        "conditions": STATUS["conditions"],
    }
    name = unique_name("good")
    requests.create(PROJECT, name, "x.com")
    assert _status_patch(api, PROJECT.path(name), good)["status"]["pools"][0]["generation"] == 0

    builtin = unique_name("gen0")
    requests.create(BUILTIN, builtin, "x.com")
    message = _rejected(_status_patch, api, BUILTIN.path(builtin), good)
    assert "status.pools[0].generation: Required value" in message


def test_printer_columns_of_a_pending_request(
    cluster: harness.Cluster, unique_name: Callable[[str], str], requests: RequestTracker
) -> None:
    """Vector 85 and C6: a pending request prints empty POOLS and STATUS cells (kubectl 1.37
    prints nothing there, not ``<none>``)."""
    name = unique_name("pending")
    requests.create(PROJECT, name, "x.com", poolName="a/b")
    table = cluster.kubectl("get", "rpsr", name, "-o", "wide").stdout.splitlines()
    header = table[0]
    assert header.split() == ["NAME", "DRIVER", "POOLS", "STATUS", "AGE", "POOL"]
    row = table[1]
    assert row[header.index("POOLS") : header.index("AGE")].strip() == ""
    assert row.split()[0:2] == [name, "x.com"]
    assert row.split()[-1] == "a/b"
    assert "<none>" not in row
