"""The kind cluster configuration, generated from the same constants as the devcluster."""

from __future__ import annotations

import yaml

from .constants import FEATURE_GATES, REAL_CLUSTER_CONTROLLERS, RUNTIME_CONFIG


def kind_config() -> str:
    kubeadm_patch = yaml.safe_dump(
        {
            "kind": "ClusterConfiguration",
            "controllerManager": {"extraArgs": {"controllers": REAL_CLUSTER_CONTROLLERS}},
        }
    )
    config = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "featureGates": dict(FEATURE_GATES),
        "runtimeConfig": dict(RUNTIME_CONFIG),
        "nodes": [
            {"role": "control-plane", "kubeadmConfigPatches": [kubeadm_patch]},
            {"role": "worker"},
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)
