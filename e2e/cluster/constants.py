"""Constants shared by the devcluster launcher, the build and the kind config.

They are the single place where feature gates, API versions and controller lists are
written, so the apiserver, scheduler, controller manager and kind all get the same values.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTROLPLANE_DIR = REPO_ROOT / "e2e" / "controlplane"
CONFORMANCE_DIR = REPO_ROOT / "e2e" / "conformance"
DEFAULT_STATE_DIR = REPO_ROOT / ".cluster"

BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kubectl",
    "kubelet",
    "kube-proxy",
    "dra-test-driver",
)
SERVER_BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet", "kube-proxy")

# Alpha DRA gates that are off by default in 1.37; every other DRA gate is on (and some are
# locked, so naming them would only warn).
FEATURE_GATES: dict[str, bool] = {
    "DRAResourcePoolStatus": True,
    "DRAPartitionableDevicesType": True,
    "DRADeviceCompatibilityGroups": True,
    "DRANodeAllocatableResources": True,
    "DRAOptionalNodeOperations": True,
}
FEATURE_GATES_FLAG = ",".join(f"{k}={str(v).lower()}" for k, v in FEATURE_GATES.items())

RUNTIME_CONFIG: dict[str, str] = {
    "resource.k8s.io/v1beta1": "true",
    "resource.k8s.io/v1beta2": "true",
    "resource.k8s.io/v1alpha3": "true",
}
RUNTIME_CONFIG_FLAG = ",".join(f"{k}={v}" for k, v in RUNTIME_CONFIG.items())

# The workload claims option (KEP-5729: a PodGroup's templated ResourceClaims). Both gates are
# beta and off by default in 1.37, neither is locked, and DRAWorkloadResourceClaims depends on
# GenericWorkload, without which the API server also stores no PodGroup. Every client of
# PodGroups in 1.37 (scheduler, resourceclaim controller) uses scheduling.k8s.io/v1beta1, a beta
# version the API server serves only when the runtime config asks for it.
WORKLOAD_CLAIMS_FEATURE_GATES: dict[str, bool] = {
    "GenericWorkload": True,
    "DRAWorkloadResourceClaims": True,
}
WORKLOAD_CLAIMS_RUNTIME_CONFIG: dict[str, str] = {"scheduling.k8s.io/v1beta1": "true"}


def feature_gates(workload_claims: bool = False) -> dict[str, bool]:
    """The gates of every component: the apiserver, scheduler, controller manager and kubelet."""
    return {**FEATURE_GATES, **(WORKLOAD_CLAIMS_FEATURE_GATES if workload_claims else {})}


def feature_gates_flag(workload_claims: bool = False) -> str:
    return ",".join(f"{k}={str(v).lower()}" for k, v in feature_gates(workload_claims).items())


def runtime_config(workload_claims: bool = False) -> dict[str, str]:
    return {**RUNTIME_CONFIG, **(WORKLOAD_CLAIMS_RUNTIME_CONFIG if workload_claims else {})}


def runtime_config_flag(workload_claims: bool = False) -> str:
    return ",".join(f"{k}={v}" for k, v in runtime_config(workload_claims).items())


DRA_CONTROLLERS = (
    "resourceclaim-controller",
    "device-taint-eviction-controller",
    "resourcepoolstatusrequest-controller",
)
# node-lifecycle stays off in both modes: fake nodes have no kubelet heartbeat.
DEFAULT_MODE_CONTROLLERS = ",".join(["*", *(f"-{c}" for c in DRA_CONTROLLERS), "-node-lifecycle-controller"])
UPSTREAM_MODE_CONTROLLERS = ",".join(["*", *DRA_CONTROLLERS, "-node-lifecycle-controller"])
# What a real cluster's kube-controller-manager needs so our operators replace the in-tree ones.
REAL_CLUSTER_CONTROLLERS = ",".join(["*", *(f"-{c}" for c in DRA_CONTROLLERS)])

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_CLUSTER_FIRST_IP = "10.0.0.1"
LOOPBACK = "127.0.0.1"

FAKE_NODE_LABEL = "dra-operators.test/fake-node"
E2E_NAMESPACE_LABEL = "dra-operators.test/e2e"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
PLACEHOLDER_IMAGE = "registry.invalid/pause:none"
