"""Pure parts of the devcluster: the loopback rule, go.mod generation, the kind config."""

from __future__ import annotations

import pytest
import yaml

from devcluster import gomod, launcher
from devcluster.constants import FEATURE_GATES_FLAG, REAL_CLUSTER_CONTROLLERS
from devcluster.kind import kind_config

UPSTREAM = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgo.etcd.io/etcd/server/v3 v3.7.0 // indirect
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
\texample.com/forked => example.com/fork v1.2.3
)
"""


def test_non_loopback_flags_are_refused() -> None:
    with pytest.raises(launcher.ClusterError, match=r"is not on 127\.0\.0\.1"):
        launcher.check_loopback("kube-apiserver", ["--bind-address=0.0.0.0"])
    with pytest.raises(launcher.ClusterError, match=r"is not on 127\.0\.0\.1"):
        launcher.check_loopback("etcd", ["--listen-client-urls=http://10.1.2.3:2379"])
    launcher.check_loopback("etcd", ["--initial-cluster=devcluster=http://127.0.0.1:2380", "--v=1"])


def test_staging_set_is_the_local_replace_set() -> None:
    upstream = gomod.parse_upstream(UPSTREAM)
    # Replaced but never required (the sample modules upstream): still part of the staging set.
    assert upstream.staging == {"k8s.io/api", "k8s.io/client-go", "k8s.io/sample-controller"}
    assert upstream.go_directive == "1.26.0"
    assert upstream.godebug == ("default=go1.26",)
    gomod.check_staging_consistent(upstream)


def test_rendered_gomod_pins_staging_to_the_release() -> None:
    text = gomod.render_gomod(gomod.parse_upstream(UPSTREAM), "v1.37.2")
    assert text.startswith(gomod.HEADER)
    assert "\tk8s.io/api => k8s.io/api v0.37.2\n" in text
    assert "\tk8s.io/sample-controller => k8s.io/sample-controller v0.37.2\n" in text
    assert "\texample.com/forked => example.com/fork v1.2.3\n" in text
    assert "toolchain" not in text
    assert gomod.current_replaces(text)["k8s.io/client-go"] == "k8s.io/client-go v0.37.2"


def test_required_placeholder_without_replace_is_an_error() -> None:
    broken = UPSTREAM.replace("\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n", "")
    with pytest.raises(gomod.GoModError, match="without a staging replace"):
        gomod.check_staging_consistent(gomod.parse_upstream(broken))


def test_staging_version() -> None:
    assert gomod.staging_version("v1.37.2") == "v0.37.2"
    with pytest.raises(gomod.GoModError):
        gomod.staging_version("1.37")


def test_kind_config_uses_the_same_gates_and_controllers() -> None:
    doc = yaml.safe_load(kind_config())
    gates = ",".join(f"{k}={str(v).lower()}" for k, v in doc["featureGates"].items())
    assert gates == FEATURE_GATES_FLAG
    patch = yaml.safe_load(doc["nodes"][0]["kubeadmConfigPatches"][0])
    assert patch["controllerManager"]["extraArgs"]["controllers"] == REAL_CLUSTER_CONTROLLERS
    assert doc["runtimeConfig"]["resource.k8s.io/v1alpha3"] == "true"
