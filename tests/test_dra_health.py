"""The kubelet's health reports resolved to devices, and the policy behind a rule (operators.dra.health)."""

from __future__ import annotations

from typing import Any

from operators.core.models import OwnerReference
from operators.dra import claims, health
from operators.dra.pools import DeviceId

GPU = "gpu.example.com"
Claim = claims.ResourceClaim[claims.AllocationResult[health.RequestResult]]


def _pod(reports: dict[str, dict[str, list[dict[str, Any]]]]) -> health.Pod:
    return health.Pod.model_validate(
        {
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-gpu"}],
                "containerStatuses": [
                    {
                        "name": container,
                        "allocatedResourcesStatus": [
                            {"name": name, "resources": resources} for name, resources in by_name.items()
                        ],
                    }
                    for container, by_name in reports.items()
                ],
            },
        }
    )


def _claim(*devices: tuple[str, str]) -> Claim:
    return Claim.model_validate(
        {
            "metadata": {"name": "train-gpu", "namespace": "ml"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": request, "driver": GPU, "pool": "node-1", "device": device}
                            for request, device in devices
                        ]
                    }
                }
            },
        }
    )


CLAIMS = {("ml", "train-gpu"): _claim(("gpu", "gpu-0"), ("gpu", "gpu-1"), ("nic/fast", "nic-0"))}


def test_each_entry_names_its_container_claim_device_health_and_message() -> None:
    pod = _pod(
        {
            "main": {
                "claim:gpu/gpu": [
                    {"resourceID": f"{GPU}/node-1/gpu-0", "health": "Healthy"},
                    {"resourceID": f"{GPU}/node-1/gpu-1", "health": "Unhealthy", "message": "ECC errors"},
                ]
            },
            "side": {"claim:gpu/nic": [{"resourceID": "vendor.com/nic=0", "health": "Unknown"}]},
        }
    )
    reports = list(health.device_reports(pod, CLAIMS))
    assert [(r.container, r.claim, r.health, r.message, r.device) for r in reports] == [
        ("main", "train-gpu", "Healthy", "", DeviceId(GPU, "node-1", "gpu-0")),
        ("main", "train-gpu", "Unhealthy", "ECC errors", DeviceId(GPU, "node-1", "gpu-1")),
        # A CDI ID names the request's only device (the subrequest counts as its request).
        ("side", "train-gpu", "Unknown", "", DeviceId(GPU, "node-1", "nic-0")),
    ]
    assert [r.resource_id for r in health.device_reports(pod, CLAIMS, {"Unhealthy"})] == [
        f"{GPU}/node-1/gpu-1"
    ]


def test_an_entry_that_names_no_device_for_sure_is_kept_unresolved() -> None:
    pod = _pod({"main": {"claim:gpu": [{"resourceID": "vendor.com/gpu=0", "health": "Unhealthy"}]}})
    (report,) = health.device_reports(pod, CLAIMS)
    assert (report.claim, report.device) == ("train-gpu", None)
    assert [r.device for r in health.device_reports(pod, {})] == [None]


def test_device_plugin_reports_and_pods_without_reports_yield_nothing() -> None:
    plugin = _pod({"main": {"example.com/gpu": [{"resourceID": "dev-0", "health": "Unhealthy"}]}})
    assert list(plugin.containers_reporting) == []
    assert list(health.device_reports(plugin, CLAIMS)) == []
    assert list(health.device_reports(health.Pod.model_validate({"metadata": {"name": "p"}}), CLAIMS)) == []


def test_a_rule_names_the_health_policy_that_controls_it_in_any_version_of_the_group() -> None:
    def ref(api_version: str, kind: str, controller: bool | None = True) -> OwnerReference:
        return OwnerReference(
            api_version=api_version, kind=kind, name="gpu-health", uid="u", controller=controller
        )

    assert health.health_policy_of([ref("dra-operators.io/v1alpha1", "DeviceHealthPolicy")]) == "gpu-health"
    assert health.health_policy_of([ref("dra-operators.io/v1", "DeviceHealthPolicy")]) == "gpu-health"
    assert health.health_policy_of([ref("dra-operators.io/v1alpha1", "DeviceHealthPolicy", None)]) is None
    assert health.health_policy_of([ref("example.com/v1", "DeviceHealthPolicy")]) is None
    assert health.health_policy_of([ref("dra-operators.io/v1alpha1", "DeviceTaintSelector")]) is None
