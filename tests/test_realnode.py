"""The real node's layout and configuration files (no processes are started here)."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

import pytest

from devcluster import realnode

pytestmark = pytest.mark.unit

UNIX_PATH_MAX = 107  # sun_path is 108 bytes with the terminating NUL


def test_layout_is_derived_from_the_state_directory() -> None:
    one = realnode.NodeLayout.of(Path("/tmp/a/cluster"))
    two = realnode.NodeLayout.of(Path("/tmp/b/cluster"))
    assert one == realnode.NodeLayout.of(Path("/tmp/a/cluster"))
    assert one.key != two.key
    assert one.bridge != two.bridge
    assert one.cgroup_parent != two.cgroup_parent
    assert one.run != two.run


@pytest.mark.parametrize(
    "state", ["/tmp/a/cluster", "/tmp/b/.cluster", "/srv/ci/.conformance/ours-two-nodes"]
)
def test_the_second_node_shares_nothing_on_the_machine_with_the_first(state: str) -> None:
    first = realnode.NodeLayout.of(Path(state))
    second = realnode.NodeLayout.second(Path(state))
    assert second == realnode.NodeLayout.second(Path(state)), "a stop finds what a start made"
    assert second.disk == Path(state) / realnode.SECOND_NODE_DIR / "node"
    assert not second.disk.is_relative_to(first.disk)
    for name in ("bridge", "cgroup_parent", "run", "kubelet_root", "containerd_socket", "subnet", "node_ip"):
        assert getattr(first, name) != getattr(second, name), name
    assert not ipaddress.ip_network(first.subnet).overlaps(ipaddress.ip_network(second.subnet))
    assert len(str(second.kubelet_root)) == len(str(first.kubelet_root))


def test_socket_paths_stay_short_under_a_deep_state_directory() -> None:
    deep = Path("/" + "/".join(["a-rather-long-directory-name"] * 8)) / ".cluster"
    layout = realnode.NodeLayout.of(deep)
    sockets = [
        layout.containerd_socket,
        Path(f"{layout.containerd_socket}.ttrpc"),
        layout.kubelet_root / "plugins_registry" / f"{realnode.DRIVER_NAME}-reg.sock",
        layout.kubelet_root / "plugins" / realnode.DRIVER_NAME / "dra.sock",
        layout.kubelet_root / "pod-resources" / "kubelet.sock",
    ]
    assert all(len(str(s)) <= UNIX_PATH_MAX for s in sockets), [len(str(s)) for s in sockets]


def test_a_rolling_update_socket_of_a_long_driver_name_fits() -> None:
    """Upstream's spec "rolling update with long driver name": during a rolling update
    kubeletplugin names the registration socket <driver>-<11 characters>-reg.sock and the
    service socket <driver>/dra-<pod UID>.sock; both must fit the 107 bytes of a socket path."""
    layout = realnode.NodeLayout.of(Path("/home/dev/src/dra/.conformance/ours-full"))
    registration = (
        layout.kubelet_root
        / "plugins_registry"
        / ("gpu.dra-example-driver.sigs.k8s.io-" + "x" * 11 + "-reg.sock")
    )
    assert len(str(registration)) < 108


@pytest.mark.parametrize("state", ["/tmp/x", "/tmp/dra-devcluster-abcdefgh", "/home/dev/src/dra/.cluster"])
def test_interface_name_and_addresses(state: str) -> None:
    layout = realnode.NodeLayout.of(Path(state))
    assert len(layout.bridge) <= 15  # IFNAMSIZ - 1
    subnet = ipaddress.IPv4Network(layout.subnet)
    assert subnet.prefixlen == 24
    assert subnet.subnet_of(ipaddress.IPv4Network("10.200.0.0/13"))
    node_ip = ipaddress.ip_address(layout.node_ip)
    assert node_ip in subnet
    assert not node_ip.is_loopback


def test_kubelet_configuration() -> None:
    layout = realnode.NodeLayout.of(Path("/tmp/c"))
    config = realnode.kubelet_config(
        layout, Path("/tmp/c/pki/ca.crt"), 10250, 10248, [realnode.REAL_NODE_TAINT]
    )
    assert config["failCgroupV1"] is False
    assert config["makeIPTablesUtilChains"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == f"/{layout.cgroup_parent}"
    assert config["containerRuntimeEndpoint"] == f"unix://{layout.containerd_socket}"
    assert config["address"] == layout.node_ip
    assert config["healthzBindAddress"] == "127.0.0.1"
    assert config["registerWithTaints"] == [realnode.REAL_NODE_TAINT]
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["imageGCHighThresholdPercent"] == 100


def _paths(value: object) -> list[str]:
    if isinstance(value, dict):
        return [p for v in value.values() for p in _paths(v)]
    if isinstance(value, list):
        return [p for v in value for p in _paths(v)]
    return [value] if isinstance(value, str) and value.startswith("/") else []


def test_containerd_configuration_keeps_every_path_inside_the_node() -> None:
    layout = realnode.NodeLayout.of(Path("/tmp/d"))
    config = tomllib.loads(realnode.containerd_config(layout, "docker.io/library/pause:test"))
    allowed = (str(layout.disk), str(layout.run), str(realnode.CNI_BIN_DIR), "/usr/", "/bin/", "/sbin/")
    outside = [p for p in _paths(config) if not p.startswith(allowed)]
    assert outside == []
    assert config["imports"] == []
    assert "io.containerd.internal.v1.opt" in config["disabled_plugins"]
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["cdi_spec_dirs"] == [str(layout.cdi_dir)]
    assert runtime["netns_mounts_under_state_dir"] is True
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == "docker.io/library/pause:test"
    # Registries are trusted only through the node's own hosts directory (its registry's CA).
    assert images["registry"] == {"config_path": str(layout.registry_hosts_dir)}


def test_upstream_suite_cdi_directory_only_where_asked() -> None:
    layout = realnode.NodeLayout.of(Path("/tmp/d"))
    config = tomllib.loads(realnode.containerd_config(layout, "docker.io/library/pause:test", host_cdi=True))
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["cdi_spec_dirs"] == [str(layout.cdi_dir), str(realnode.HOST_CDI_DIR)]


def test_teardown_removes_only_the_cdi_specs_the_node_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_cdi = tmp_path / "var-run-cdi"
    host_cdi.mkdir()
    (host_cdi / "someone-elses.json").write_text("{}")
    monkeypatch.setattr(realnode, "HOST_CDI_DIR", host_cdi)
    layout = realnode.NodeLayout.of(tmp_path / "state")
    layout.disk.mkdir(parents=True)
    realnode.remember_host_cdi(layout)
    (host_cdi / "test-driver.dra.k8s.io-claim.json").write_text("{}")
    assert realnode.forget_host_cdi(layout) == []
    assert sorted(p.name for p in host_cdi.iterdir()) == ["someone-elses.json"]
    assert not layout.host_cdi_record.exists()


def test_teardown_removes_the_cdi_directory_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host_cdi = tmp_path / "var-run-cdi"
    monkeypatch.setattr(realnode, "HOST_CDI_DIR", host_cdi)
    layout = realnode.NodeLayout.of(tmp_path / "state")
    layout.disk.mkdir(parents=True)
    realnode.remember_host_cdi(layout)
    host_cdi.mkdir()
    (host_cdi / "spec.json").write_text("{}")
    realnode.forget_host_cdi(layout)
    assert not host_cdi.exists()


def test_cni_configuration_never_masquerades() -> None:
    layout = realnode.NodeLayout.of(Path("/tmp/e"))
    config = realnode.cni_config(layout)
    bridge = config["plugins"][0]
    assert bridge["bridge"] == layout.bridge
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": layout.subnet, "gateway": layout.node_ip}]]
    assert bridge["ipam"]["dataDir"].startswith(str(layout.disk))


def test_mounts_under_the_node_deepest_first() -> None:
    layout = realnode.NodeLayout.of(Path("/tmp/f"))
    run = layout.run
    mountinfo = "\n".join(
        [
            "22 1 8:0 / / rw - ext4 /dev/vda rw",
            f"30 22 0:5 / {run}/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw - overlay o rw",
            f"31 22 0:6 / {run}/k/pods/uid/volumes/projected/kube\\040api rw - tmpfs t rw",
            f"32 22 0:7 / {run}-other/x rw - tmpfs t rw",
            "33 22 0:8 / /tmp/f/node/containerd/tmpmounts/m1 rw - overlay o rw",
            "34 22 0:9 / /tmp/f/nodes rw - tmpfs t rw",
        ]
    )
    found = layout.mounts(mountinfo)
    assert found == [
        f"{run}/k/pods/uid/volumes/projected/kube api",
        f"{run}/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs",
        "/tmp/f/node/containerd/tmpmounts/m1",
    ]


def test_kube_proxy_configuration() -> None:
    config = realnode.proxy_config(Path("/k/proxy.kubeconfig"), 1001, 1002)
    assert config["mode"] == "iptables"
    assert config["hostnameOverride"] == realnode.NODE_NAME
    # Only loopback listeners, and the machine's conntrack sizes left alone.
    assert config["healthzBindAddress"] == "127.0.0.1:1001"
    assert config["metricsBindAddress"] == "127.0.0.1:1002"
    assert config["conntrack"]["maxPerCore"] == 0
    # Replies between pods of the one bridge must pass the host, where the Service NAT is undone.
    assert config["iptables"]["masqueradeAll"] is True


def test_only_the_node_address_is_allowed_beside_loopback() -> None:
    from devcluster.launcher import ClusterError, check_loopback

    layout = realnode.NodeLayout.of(Path("/tmp/x"))
    args = [f"--bind-address={layout.node_ip}", f"--advertise-address={layout.node_ip}"]
    check_loopback("kube-apiserver", args, (layout.node_ip,))
    with pytest.raises(ClusterError, match=r"is not on 127\.0\.0\.1"):
        check_loopback("kube-apiserver", args)
    with pytest.raises(ClusterError):
        check_loopback("kube-apiserver", ["--bind-address=0.0.0.0"], (layout.node_ip,))
