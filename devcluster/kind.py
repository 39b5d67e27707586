"""The kind cluster configuration, generated from the same constants as the devcluster."""

from __future__ import annotations

import yaml

from .constants import DEFAULT_PROFILE, feature_gates, kcm_controllers, runtime_config


def kind_config(
    workload_claims: bool = False, k8s_version: str | None = None, profile: str = DEFAULT_PROFILE
) -> str:
    """``workload_claims``: the gates of the workload claims option on every node's components and
    the PodGroup API served, as the devcluster's ``--workload-claims`` does; ``k8s_version`` and
    ``profile`` as the devcluster's (the node image must be of that version)."""
    controllers = kcm_controllers(upstream_dra=False, k8s_version=k8s_version, real_cluster=True)
    kubeadm_patch = yaml.safe_dump(
        {
            "kind": "ClusterConfiguration",
            "controllerManager": {"extraArgs": {"controllers": controllers}},
        }
    )
    config = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "featureGates": feature_gates(workload_claims, profile),
        "runtimeConfig": runtime_config(workload_claims, profile),
        "nodes": [
            {"role": "control-plane", "kubeadmConfigPatches": [kubeadm_patch]},
            {"role": "worker"},
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)
