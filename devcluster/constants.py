"""Constants shared by the devcluster launcher, the build and the kind config.

They are the single place where feature gates, API versions and controller lists are
written, so the apiserver, scheduler, controller manager and kind all get the same values.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONTROLPLANE_DIR = REPO_ROOT / "devcluster" / "controlplane"
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


def minor_of(k8s_version: str) -> int:
    return int(k8s_version.lstrip("v").split(".")[1])


# A cluster's settings: ``lab`` is the above (every DRA API and gate the project serves, on 1.37
# only, whose gate names they are); ``defaults`` is upstream's defaults, no gate and no runtime config
# named, as on the managed clusters users run.
PROFILES = ("lab", "defaults")
DEFAULT_PROFILE = "lab"


def check_profile(
    profile: str, k8s_version: str, default_version: str, workload_claims: bool = False
) -> None:
    """Refuses a combination no component would start with, in one line a user can act on."""
    if profile not in PROFILES:
        raise ValueError(f"PROFILE={profile}: expected one of {', '.join(PROFILES)}")
    if profile == "lab" and k8s_version != default_version:
        raise ValueError(
            f"PROFILE=lab names {default_version}'s alpha gates, which {k8s_version} does not know; "
            "use PROFILE=defaults"
        )
    if profile == "defaults" and workload_claims:
        raise ValueError("WORKLOAD_CLAIMS=1 turns gates on; it needs PROFILE=lab")


# Binding conditions became beta, on by default, in 1.36; kube-scheduler refuses a bindingTimeout
# in its DynamicResources arguments while they are off.
BINDING_CONDITIONS_DEFAULT_SINCE_MINOR = 36


def binding_conditions_on(k8s_version: str, profile: str) -> bool:
    return profile == "lab" or minor_of(k8s_version) >= BINDING_CONDITIONS_DEFAULT_SINCE_MINOR


def feature_gates(workload_claims: bool = False, profile: str = DEFAULT_PROFILE) -> dict[str, bool]:
    """The gates of every component: the apiserver, scheduler, controller manager and kubelet."""
    if profile == "defaults":
        return {}
    return {**FEATURE_GATES, **(WORKLOAD_CLAIMS_FEATURE_GATES if workload_claims else {})}


def feature_gates_flag(workload_claims: bool = False, profile: str = DEFAULT_PROFILE) -> str:
    return ",".join(f"{k}={str(v).lower()}" for k, v in feature_gates(workload_claims, profile).items())


def runtime_config(workload_claims: bool = False, profile: str = DEFAULT_PROFILE) -> dict[str, str]:
    if profile == "defaults":
        return {}
    return {**RUNTIME_CONFIG, **(WORKLOAD_CLAIMS_RUNTIME_CONFIG if workload_claims else {})}


def runtime_config_flag(workload_claims: bool = False, profile: str = DEFAULT_PROFILE) -> str:
    return ",".join(f"{k}={v}" for k, v in runtime_config(workload_claims, profile).items())


DRA_CONTROLLERS = (
    "resourceclaim-controller",
    "device-taint-eviction-controller",
    "resourcepoolstatusrequest-controller",
)
# kube-controller-manager refuses to start on a controller name it does not know, even to exclude
# it; the pool status controller arrived in 1.36.
CONTROLLER_SINCE_MINOR = {"resourcepoolstatusrequest-controller": 36}


def dra_controllers(k8s_version: str | None = None) -> tuple[str, ...]:
    """The in-tree DRA controllers kube-controller-manager of that version knows (None: the newest)."""
    if k8s_version is None:
        return DRA_CONTROLLERS
    minor = minor_of(k8s_version)
    return tuple(c for c in DRA_CONTROLLERS if CONTROLLER_SINCE_MINOR.get(c, 0) <= minor)


def kcm_controllers(upstream_dra: bool, k8s_version: str | None = None, real_cluster: bool = False) -> str:
    """kube-controller-manager's --controllers: ours replace the in-tree DRA controllers unless
    ``upstream_dra``. node-lifecycle stays off in devclusters in both modes: fake nodes have no
    kubelet heartbeat; a real cluster keeps it."""
    names = dra_controllers(k8s_version)
    dra = list(names) if upstream_dra else [f"-{c}" for c in names]
    return ",".join(["*", *dra, *([] if real_cluster else ["-node-lifecycle-controller"])])


DEFAULT_MODE_CONTROLLERS = kcm_controllers(upstream_dra=False)
UPSTREAM_MODE_CONTROLLERS = kcm_controllers(upstream_dra=True)
# What a real cluster's kube-controller-manager needs so our operators replace the in-tree ones.
REAL_CLUSTER_CONTROLLERS = kcm_controllers(upstream_dra=False, real_cluster=True)

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_CLUSTER_FIRST_IP = "10.0.0.1"
LOOPBACK = "127.0.0.1"

FAKE_NODE_LABEL = "dra-operators.test/fake-node"
E2E_NAMESPACE_LABEL = "dra-operators.test/e2e"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
PLACEHOLDER_IMAGE = "registry.invalid/pause:none"
