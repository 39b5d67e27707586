"""The kind cluster configuration, generated from the same constants as the devcluster."""

from __future__ import annotations

import yaml

from .constants import REAL_CLUSTER_CONTROLLERS, feature_gates, runtime_config


def kind_config(workload_claims: bool = False) -> str:
    """``workload_claims``: the gates of the workload claims option on every node's components and
    the PodGroup API served, as the devcluster's ``--workload-claims`` does."""
    kubeadm_patch = yaml.safe_dump(
        {
            "kind": "ClusterConfiguration",
            "controllerManager": {"extraArgs": {"controllers": REAL_CLUSTER_CONTROLLERS}},
        }
    )
    config = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "featureGates": feature_gates(workload_claims),
        "runtimeConfig": runtime_config(workload_claims),
        "nodes": [
            {"role": "control-plane", "kubeadmConfigPatches": [kubeadm_patch]},
            {"role": "worker"},
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)
