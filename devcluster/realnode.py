"""The devcluster's one real node: containerd, kubelet, CNI and the test DRA driver.

Pods bound to this node really run (runc containers from images built here), and its DRA claims
are really prepared by the test driver's kubelet plugin. Fake nodes stay for scale tests and
benchmarks.

Where things live:
- ``<state>/node/``: everything on disk (containerd's image store, configuration, CDI specs, CNI
  IPAM records, pod logs).
- ``/run/dra-operators/<key>/``: what holds unix sockets (containerd's socket and state). A
  socket path may be at most 107 bytes, and a state directory inside a checkout can be
  arbitrarily deep; ``<state>/node/run`` links there.
- ``<state>/node/registry/`` and ``<state>/node/certs.d/``: the node's image registry and
  containerd's trust of it (``registry``).
- ``/run/dra/<key>/``: the kubelet's root directory (plugin registry, DRA plugin sockets), as short
  as ``/var/lib/kubelet`` (see KUBELET_ROOTS).
- Names on the machine (the bridge, the cgroup subtree) and the pod subnet carry a key derived
  from the state directory, so ``make run`` and ``make test`` can each have their node at once.

``stop`` leaves nothing behind: it stops the processes (and every container process, found
through the node's own cgroup subtree), unmounts whatever is mounted under the node's
directories, deletes the bridge and the cgroup subtree, and removes the runtime directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from . import registry
from .constants import DEFAULT_PROFILE, LOOPBACK, feature_gates

NODE_NAME = "devcluster-node"
# The second node (``second_node``): a kubelet and containerd of their own, with neither the test
# driver nor the registry. It exists for upstream's specs that need two ready nodes and whose driver
# publishes from the control plane (its kubelet plugin off).
SECOND_NODE_NAME = "devcluster-node-2"
SECOND_NODE_DIR = "second-node"
# Its components, named apart from the first node's: each runs the binary without the suffix.
SECOND_NODE_SUFFIX = "-2"
SECOND_NODE_PROGRAMS = {f"{program}{SECOND_NODE_SUFFIX}": program for program in ("containerd", "kubelet")}
DRIVER_NAME = "gpu.dra-operators.test"
DRIVER_DEVICES = 4
REAL_NODE_LABEL = "dra-operators.test/real-node"
# The pytest devcluster taints its real node, so that the tests written for fake nodes (whose
# pods must never start) cannot land there; real-node tests tolerate it.
REAL_NODE_TAINT = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
RUNTIME_ROOT = Path("/run/dra-operators")
# The kubelets' root directories, apart and short: a DRA driver's socket during a rolling update is
# <root>/plugins/<driver>/dra-<pod UID>.sock, and upstream's suite checks that a 34-character
# driver name still fits the 107 bytes of a socket path ("rolling update with long driver name"),
# which leaves 18 characters for the root (/var/lib/kubelet has 16; /run/dra/<key> has 17).
KUBELET_ROOTS = Path("/run/dra")
# Where upstream's DRA e2e suite puts its CDI specs (its proxy pod mounts this host path).
HOST_CDI_DIR = Path("/var/run/cdi")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
RUNC = "runc"
# Debian packages the node and its images need from the machine, each with a file that shows it
# is installed (containerd, the kubelet and the test driver are built from Go modules).
DEBIAN_PACKAGES = {
    "runc": "/usr/sbin/runc",
    "containernetworking-plugins": f"{CNI_BIN_DIR}/bridge",
    "iptables": "/usr/sbin/iptables",
    "mmdebstrap": "/usr/bin/mmdebstrap",
    "buildah": "/usr/bin/buildah",
    "uidmap": "/usr/bin/newuidmap",
    "gcc": "/usr/bin/gcc",
    "libc6-dev": "/usr/lib/x86_64-linux-gnu/libc.a",
    # The node's registry and what pushes images to it (devcluster/registry.py).
    "docker-registry": "/usr/bin/docker-registry",
    "skopeo": "/usr/bin/skopeo",
    # The release's arm64 image, built here under emulation (images.RELEASE_ARCHITECTURES).
    "qemu-user-static": "/usr/bin/qemu-aarch64-static",
}


class NodeError(RuntimeError):
    pass


@dataclass(frozen=True)
class NodeLayout:
    """Every path and name of one real node, derived from the devcluster's state directory."""

    state_dir: Path
    key: str

    @classmethod
    def of(cls, state_dir: Path) -> NodeLayout:
        return cls(state_dir, _key(str(state_dir.resolve())))

    @classmethod
    def second(cls, state_dir: Path) -> NodeLayout:
        """The second node of the devcluster in ``state_dir``: its disk under ``second-node/``, and a
        key of its own whose subnet and bridge differ from the first node's."""
        first = cls.of(state_dir)
        seed = str(state_dir.resolve())
        while True:
            seed += SECOND_NODE_SUFFIX
            layout = cls(state_dir / SECOND_NODE_DIR, _key(seed))
            if layout.subnet_prefix != first.subnet_prefix and layout.bridge != first.bridge:
                return layout

    @property
    def disk(self) -> Path:
        return self.state_dir / "node"

    @property
    def run(self) -> Path:
        return RUNTIME_ROOT / self.key

    @property
    def kubelet_root(self) -> Path:
        return KUBELET_ROOTS / self.key

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def cdi_dir(self) -> Path:
        return self.disk / "cdi"

    @property
    def host_cdi_record(self) -> Path:
        """What was in HOST_CDI_DIR before the node used it: what teardown leaves there."""
        return self.disk / "host-cdi-before.json"

    @property
    def device_health(self) -> Path:
        """The test driver's control file (``set_device_health``); absent: every device Healthy."""
        return self.disk / "device-health.json"

    @property
    def registry_hosts_dir(self) -> Path:
        """containerd's ``config_path``: one ``<host:port>/hosts.toml`` per registry it trusts."""
        return self.disk / "certs.d"

    @property
    def registry_storage(self) -> Path:
        return self.disk / "registry" / "storage"

    @property
    def cni_conf_dir(self) -> Path:
        return self.disk / "cni" / "net.d"

    @property
    def bridge(self) -> str:
        return f"drabr{self.key[:6]}"  # at most 15 bytes (IFNAMSIZ)

    @property
    def cgroup_parent(self) -> str:
        return f"dra-operators-{self.key}"

    @property
    def subnet_prefix(self) -> str:
        """A /24 of 10.200.0.0/13 chosen by the key: pods' addresses exist only on this machine."""
        value = int(self.key, 16)
        return f"10.{200 + value % 8}.{(value >> 3) % 256}"

    @property
    def node_ip(self) -> str:
        # The bridge's gateway address: the kubelet refuses a loopback node IP, and the
        # API server reaches the kubelet (logs, exec) on it without leaving the machine.
        return f"{self.subnet_prefix}.1"

    @property
    def subnet(self) -> str:
        return f"{self.subnet_prefix}.0/24"

    def mounts(self, mountinfo: str | None = None) -> list[str]:
        """Mount points under the node's directories (from /proc/self/mountinfo), deepest first."""
        if mountinfo is None:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        roots = [
            str(self.disk.resolve()) if self.disk.exists() else str(self.disk),
            str(self.run),
            str(self.kubelet_root),
        ]
        found = set()
        for line in mountinfo.splitlines():
            point = _unescape(line.split()[4])
            if any(point == root or point.startswith(root + "/") for root in roots):
                found.add(point)
        return sorted(found, key=lambda p: (-p.count("/"), p))

    def cgroup_dirs(self) -> list[Path]:
        """The node's cgroup subtree in every hierarchy that has one."""
        if not CGROUP_ROOT.is_dir():
            return []
        return [
            hierarchy / self.cgroup_parent
            for hierarchy in sorted(CGROUP_ROOT.iterdir())
            if (hierarchy / self.cgroup_parent).is_dir()
        ]


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


# -- preflight --------------------------------------------------------------------------------


def preflight() -> list[str]:
    """Why this machine cannot run the real node; empty when it can."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the real node needs root (kubelet, containerd and runc manage mounts and cgroups)")
    missing = [name for name in (RUNC, "iptables", "ip") if shutil.which(name) is None]
    missing += [f"{CNI_BIN_DIR}/{p}" for p in CNI_PLUGINS if not (CNI_BIN_DIR / p).is_file()]
    if missing:
        problems.append(
            f"missing {', '.join(missing)}: apt-get install {' '.join(DEBIAN_PACKAGES)} "
            "(make node-bin installs them when run as root)"
        )
    with open("/proc/filesystems") as fs:
        if "overlay" not in fs.read():
            problems.append("the kernel has no overlay filesystem (containerd's snapshotter needs it)")
    if not (CGROUP_ROOT / "memory").is_dir() and not (CGROUP_ROOT / "cgroup.controllers").is_file():
        problems.append(f"no cgroup hierarchy at {CGROUP_ROOT}")
    return problems


def ensure_debian_packages(say: Callable[[str], None]) -> None:
    """Install the node's Debian packages when missing and we may (root with apt-get); a
    machine where we may not is told what to install by ``preflight`` or the image build."""
    missing = [name for name, probe in DEBIAN_PACKAGES.items() if not Path(probe).exists()]
    if not missing or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    say(f"installing Debian packages for the real node: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for args in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            raise NodeError(f"{' '.join(args)} failed:\n{proc.stderr[-2000:]}")


# -- configuration ----------------------------------------------------------------------------


def containerd_config(layout: NodeLayout, pause_image: str, host_cdi: bool = False) -> str:
    """containerd 2 configuration (version 3) with every path inside the node's directories."""
    runtime = "plugins.'io.containerd.cri.v1.runtime'"
    lines = [
        "version = 4",
        f'root = "{layout.disk / "containerd"}"',
        f'state = "{layout.containerd_state}"',
        # The machine's own /etc/containerd is none of this node's business.
        "imports = []",
        # Plugins that would use paths outside the node's directories (/opt/containerd, the NRI
        # socket) and are not needed.
        'disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri",'
        ' "io.containerd.image-verifier.v1.bindir", "io.containerd.tracing.processor.v1.otlp",'
        ' "io.containerd.internal.v1.tracing"]',
        "",
        # Version 4 moved the servers into plugins; the sockets stay short (see NodeLayout).
        "[plugins.'io.containerd.server.v1.grpc']",
        f'  address = "{layout.containerd_socket}"',
        "[plugins.'io.containerd.server.v1.ttrpc']",
        f'  address = "{layout.containerd_socket}.ttrpc"',
        "[plugins.'io.containerd.server.v1.debug']",
        '  address = ""',
        "[plugins.'io.containerd.server.v1.metrics']",
        '  address = ""',
        "",
        "[plugins.'io.containerd.grpc.v1.cri']",
        f'  stream_server_address = "{LOOPBACK}"',
        '  stream_server_port = "0"',
        "",
        f"[{runtime}]",
        f"  cdi_spec_dirs = {json.dumps([str(layout.cdi_dir), *([str(HOST_CDI_DIR)] if host_cdi else [])])}",
        # Sandboxes get oom_score_adj -998, which needs CAP_SYS_RESOURCE; the machines this runs
        # on may withhold it even from root (runc then fails with "can't get final child's PID
        # from pipe"). Restricted, no container goes below containerd's own score.
        "  restrict_oom_score_adj = true",
        "  netns_mounts_under_state_dir = true",
        f"[{runtime}.containerd]",
        '  default_runtime_name = "runc"',
        f"[{runtime}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"[{runtime}.containerd.runtimes.runc.options]",
        f'  BinaryName = "{shutil.which(RUNC) or RUNC}"',
        "  SystemdCgroup = false",
        f'  Root = "{layout.run / "runc"}"',
        f"[{runtime}.cni]",
        f'  bin_dirs = ["{CNI_BIN_DIR}"]',
        f'  conf_dir = "{layout.cni_conf_dir}"',
        "  max_conf_num = 1",
        "",
        "[plugins.'io.containerd.cri.v1.images']",
        '  snapshotter = "overlayfs"',
        # The node's own registry only: its hosts.toml trusts the devcluster CA. Other images
        # are imported (the pause and base images) and never pulled.
        "[plugins.'io.containerd.cri.v1.images'.registry]",
        f'  config_path = "{layout.registry_hosts_dir}"',
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
        f'  sandbox = "{pause_image}"',
    ]
    return "\n".join(lines) + "\n"


def cni_config(layout: NodeLayout) -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": "devcluster",
        "plugins": [
            {
                "type": "bridge",
                "bridge": layout.bridge,
                "isGateway": True,
                # No masquerade: pods talk to the node and each other, never beyond the machine.
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": layout.subnet, "gateway": layout.node_ip}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.disk / "cni" / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(
    layout: NodeLayout,
    ca_file: Path,
    port: int,
    healthz_port: int,
    taints: Sequence[dict[str, str]],
    workload_claims: bool = False,
    profile: str = DEFAULT_PROFILE,
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": layout.node_ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": LOOPBACK,
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca_file)},
        },
        # The only client with a certificate of the devcluster CA is the API server (logs, exec).
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{layout.cgroup_parent}",
        # These machines mount the cgroup v1 hierarchy (cgroup2 only beside it, unused), which
        # kubelet 1.37 refuses unless told to accept it.
        "failCgroupV1": False,
        "failSwapOn": False,
        "makeIPTablesUtilChains": False,
        "podLogsDir": str(layout.disk / "pod-logs"),
        "volumePluginDir": str(layout.kubelet_root / "volume-plugins"),
        "resolvConf": "",
        "registerWithTaints": list(taints),
        "featureGates": feature_gates(workload_claims, profile),
        # A busy developer disk must not taint the node or delete the imported images (the
        # registry does not have them to pull back).
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "shutdownGracePeriod": "0s",
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "20s",
    }


# -- processes --------------------------------------------------------------------------------


def _kill_cgroup_processes(layout: NodeLayout, sig: int = signal.SIGKILL) -> int:
    """Signal every process in the node's cgroup subtree (the containers); how many there were."""
    pids: set[int] = set()
    for top in layout.cgroup_dirs():
        # os.walk, not Path.rglob: a container's cgroup vanishes under the walk as it exits,
        # which rglob raises and os.walk skips.
        for directory, _, files in os.walk(top):
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in Path(directory, "cgroup.procs").read_text().split())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return len(pids)


def _processes_using(paths: Sequence[str]) -> list[int]:
    """Processes whose executable is one of ``paths`` (the shims daemonize out of our sessions)."""
    wanted = {os.path.realpath(p) for p in paths}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.path.realpath(os.readlink(entry / "exe")) in wanted:
                found.append(int(entry.name))
    return found


def _shims_of(layout: NodeLayout, shim_binary: str) -> list[int]:
    """The shims serving this node's containerd (its socket is on their command line)."""
    mine = []
    for pid in _processes_using([shim_binary]):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if str(layout.containerd_socket) in cmdline or str(layout.run) in cmdline:
                mine.append(pid)
    return mine


def _wait_gone(pids: Sequence[int], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise NodeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def link_exists(name: str) -> bool:
    return _ip("link", "show", "dev", name, check=False).returncode == 0


def setup_host(layout: NodeLayout) -> None:
    """Directories, the cgroup subtree and the bridge carrying the node IP."""
    for directory in (layout.disk, layout.cdi_dir, layout.cni_conf_dir, layout.disk / "pod-logs"):
        directory.mkdir(parents=True, exist_ok=True)
    layout.kubelet_root.mkdir(parents=True, exist_ok=True)
    link = layout.disk / "run"
    if not link.is_symlink():
        link.symlink_to(layout.run)
    # The kubelet requires its cgroup root to exist in every hierarchy it uses.
    for hierarchy in sorted(CGROUP_ROOT.iterdir()):
        if hierarchy.is_dir() and not hierarchy.name.startswith("unified"):
            with contextlib.suppress(OSError):
                (hierarchy / layout.cgroup_parent).mkdir(exist_ok=True)
    if not link_exists(layout.bridge):
        _ip("link", "add", layout.bridge, "type", "bridge")
    _ip("addr", "replace", f"{layout.node_ip}/24", "dev", layout.bridge)
    _ip("link", "set", layout.bridge, "up")
    (layout.cni_conf_dir / "10-devcluster.conflist").write_text(json.dumps(cni_config(layout), indent=2))


def remember_host_cdi(layout: NodeLayout) -> None:
    if layout.host_cdi_record.exists():
        return
    existed = HOST_CDI_DIR.is_dir()
    before = sorted(p.name for p in HOST_CDI_DIR.iterdir()) if existed else []
    layout.host_cdi_record.write_text(json.dumps({"existed": existed, "files": before}))


def forget_host_cdi(layout: NodeLayout) -> list[str]:
    """Remove from HOST_CDI_DIR what appeared there since the node started; what could not be."""
    try:
        record = json.loads(layout.host_cdi_record.read_text())
    except (OSError, ValueError):
        return []
    left = []
    kept = set(record.get("files") or [])
    for path in HOST_CDI_DIR.iterdir() if HOST_CDI_DIR.is_dir() else ():
        if path.name not in kept:
            try:
                path.unlink()
            except OSError as err:
                left.append(f"CDI spec {path}: {err}")
    if not record.get("existed"):
        with contextlib.suppress(OSError):
            HOST_CDI_DIR.rmdir()
    layout.host_cdi_record.unlink()
    return left


def teardown_host(layout: NodeLayout, shim_binary: str | None, say: Callable[[str], None]) -> list[str]:
    """Everything the node left on the machine, removed; what could not be removed."""
    left: list[str] = []
    for _ in range(20):
        if not _kill_cgroup_processes(layout):
            break
        time.sleep(0.2)
    if shim_binary:
        shims = _shims_of(layout, shim_binary)
        for pid in shims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _wait_gone(shims, 10)
    for point in layout.mounts():
        proc = subprocess.run(["umount", point], capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0:
            proc = subprocess.run(["umount", "-l", point], capture_output=True, text=True, timeout=30)
            if proc.returncode != 0:
                left.append(f"mount {point}: {proc.stderr.strip()}")
    # Veths die with their network namespaces, unmounted above; the bridge is ours to delete.
    if link_exists(layout.bridge):
        _ip("link", "del", layout.bridge, check=False)
    for top in layout.cgroup_dirs():
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                directory.rmdir()
        try:
            top.rmdir()
        except OSError as err:
            left.append(f"cgroup {top}: {err}")
    for directory, parent in ((layout.run, RUNTIME_ROOT), (layout.kubelet_root, KUBELET_ROOTS)):
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        with contextlib.suppress(OSError):
            parent.rmdir()  # only when no other node uses it
    link = layout.disk / "run"
    if link.is_symlink():
        link.unlink()
    left += forget_host_cdi(layout)
    for note in left:
        say(f"left behind: {note}")
    return left


def leftovers(layout: NodeLayout, shim_binary: str | None = None) -> list[str]:
    """What of the node is still on the machine (empty after a clean stop)."""
    found = [f"mount {m}" for m in layout.mounts()]
    found += [f"cgroup {c}" for c in layout.cgroup_dirs()]
    if link_exists(layout.bridge):
        found.append(f"link {layout.bridge}")
    found += [f"directory {d}" for d in (layout.run, layout.kubelet_root) if d.exists()]
    if shim_binary:
        found += [f"shim pid {p}" for p in _shims_of(layout, shim_binary)]
    return found


def veths_on(bridge: str) -> list[str]:
    out = _ip("-o", "link", "show", "master", bridge, check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def stop_containers(layout: NodeLayout) -> None:
    """Kill every container process of the node (they outlive containerd and the kubelet)."""
    for _ in range(50):
        if not _kill_cgroup_processes(layout):
            return
        time.sleep(0.1)


# -- device health ----------------------------------------------------------------------------

DEVICE_HEALTH = ("Healthy", "Unhealthy", "Unknown")
TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")


def set_device_health(
    node: NodeLayout, device: str, health: str, taint: dict[str, str] | None = None
) -> None:
    """Make the test driver report ``device`` (``gpu-0``...) as ``health`` to the kubelet, which
    shows it in the pods' ``allocatedResourcesStatus``, and publish ``taint`` (key, value,
    effect) on the device in its ResourceSlice; without ``taint`` the device has none. The driver
    re-reads the file within a fraction of a second; what it refuses it names in its log."""
    if health not in DEVICE_HEALTH:
        raise ValueError(f"health {health!r} is not one of {', '.join(DEVICE_HEALTH)}")
    if taint is not None and taint.get("effect") not in TAINT_EFFECTS:
        raise ValueError(f"taint effect {taint.get('effect')!r} is not one of {', '.join(TAINT_EFFECTS)}")
    states = _device_health(node)
    states[device] = {"health": health, **({"taint": dict(taint)} if taint else {})}
    _write_device_health(node, states)


def clear_device_health(node: NodeLayout, device: str | None = None) -> None:
    """``device`` (every device when None) Healthy and untainted again, as when the driver starts."""
    states = _device_health(node)
    for name in [device] if device else list(states):
        states.pop(name, None)
    _write_device_health(node, states)


def _device_health(node: NodeLayout) -> dict[str, Any]:
    try:
        states: dict[str, Any] = json.loads(node.device_health.read_text())
    except FileNotFoundError:
        return {}
    return states


def _write_device_health(node: NodeLayout, states: dict[str, Any]) -> None:
    if not states:
        node.device_health.unlink(missing_ok=True)
        return
    # Replaced by rename: the driver never reads half a file.
    staged = node.device_health.with_name(f".{node.device_health.name}.tmp-{os.getpid()}")
    staged.write_text(json.dumps(states, indent=2, sort_keys=True) + "\n")
    staged.replace(node.device_health)


# -- the sequence -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeOptions:
    bin_dir: Path  # containerd, ctr, containerd-shim-runc-v2
    images: tuple[Path, ...]  # OCI archives imported into containerd's k8s.io namespace
    pause_image: str
    taint: bool = False
    devices: int = DRIVER_DEVICES
    # Pods reach the API server and Services: the API server listens on the node IP and
    # kube-proxy runs (what the deployed operators need). Only one such cluster per machine:
    # kube-proxy's iptables chains are global.
    services: bool = False
    # containerd also reads CDI specs from HOST_CDI_DIR, where upstream's DRA e2e suite writes
    # them; teardown removes what the node's pods added there.
    host_cdi: bool = False
    # A second real node (SECOND_NODE_NAME), untainted unless ``taint``, with the same images.
    second_node: bool = False

    @property
    def shim(self) -> Path:
        return self.bin_dir / SHIM


SHIM = "containerd-shim-runc-v2"


class _Spawner(Protocol):
    dir: Path
    o: Any

    def _spawn(
        self, name: str, args: list[str], port: int, binary_dir: Path | None = None, loopback: bool = True
    ) -> None: ...

    def _wait(
        self, name: str, check: Callable[[], tuple[bool, str]], limit: float, deadline: float, url: str
    ) -> None: ...

    def _log(self, text: str) -> None: ...


def ctr(options: NodeOptions, layout: NodeLayout, *args: str, timeout: float = 300) -> str:
    proc = subprocess.run(
        [str(options.bin_dir / "ctr"), f"--address={layout.containerd_socket}", "--namespace=k8s.io", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise NodeError(f"ctr {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def prepare_host(state_dir: Path, options: NodeOptions, proxy_binary: Path | None) -> NodeLayout:
    """Before the control plane: with ``services`` the API server listens on the bridge."""
    layout = NodeLayout.of(state_dir)
    problems = preflight()
    if problems:
        raise NodeError("the real node cannot start here: " + "; ".join(problems) + " (NODE=fake avoids it)")
    teardown_host(layout, str(options.shim), lambda _: None)  # what a killed run left
    second = NodeLayout.second(state_dir)
    teardown_host(second, str(options.shim), lambda _: None)
    if options.services and proxy_binary is not None:
        cleanup_proxy_rules(proxy_binary)
    setup_host(layout)
    if options.second_node:
        setup_host(second)
    return layout


def proxy_config(kubeconfig: Path, healthz: int, metrics: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "healthzBindAddress": f"{LOOPBACK}:{healthz}",
        "metricsBindAddress": f"{LOOPBACK}:{metrics}",
        # Pods of one bridge reach each other through a Service only if the reply comes back
        # through the host, where the connection's NAT is undone.
        "iptables": {"masqueradeAll": True},
        # Zero: leave the machine's conntrack table sizes alone (root here cannot set them).
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "nodePortAddresses": ["primary"],
    }


def proxy_rules_present() -> bool:
    proc = subprocess.run(
        ["iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES"], capture_output=True, text=True, timeout=30
    )
    return proc.returncode == 0


def cleanup_proxy_rules(proxy_binary: Path) -> None:
    """kube-proxy leaves its chains when stopped; its own --cleanup removes them."""
    if shutil.which("iptables") is None or not proxy_rules_present():
        return
    subprocess.run([str(proxy_binary), "--cleanup"], capture_output=True, text=True, timeout=60, check=False)


def start(
    launcher: _Spawner,
    options: NodeOptions,
    keys: Any,
    server: str,
    admin_ctx: ssl.SSLContext,
    deadline: float,
) -> registry.Registry:
    """The registry, containerd, the images, the kubelet and the test driver, each waited for;
    the registry as its clients reach it. With ``second_node``, the second node's containerd and
    kubelet after the first's."""
    layout = NodeLayout.of(launcher.dir)
    hub = _start_registry(launcher, layout, keys, deadline)
    if options.host_cdi:
        remember_host_cdi(layout)
    _start_containerd(launcher, options, layout, "", deadline)
    _start_kubelet(launcher, options, layout, keys, server, admin_ctx, deadline, NODE_NAME, "")
    if options.second_node:
        second = NodeLayout.second(launcher.dir)
        _start_containerd(launcher, options, second, SECOND_NODE_SUFFIX, deadline)
        _start_kubelet(
            launcher, options, second, keys, server, admin_ctx, deadline, SECOND_NODE_NAME, SECOND_NODE_SUFFIX
        )
    # A new cluster's devices start Healthy, whatever a test left from the last one.
    layout.device_health.unlink(missing_ok=True)
    launcher._spawn(
        "dra-test-driver",
        [
            f"--kubeconfig={launcher.dir / 'kubeconfig'}",
            f"--node-name={NODE_NAME}",
            f"--driver-name={DRIVER_NAME}",
            f"--devices={options.devices}",
            f"--kubelet-root={layout.kubelet_root}",
            f"--cdi-dir={layout.cdi_dir}",
            f"--health-file={layout.device_health}",
        ],
        0,
        loopback=False,
    )
    slices = f"{server}/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{NODE_NAME}"
    launcher._wait("dra-test-driver", lambda: _has_items(slices, admin_ctx), 60, deadline, slices)
    if options.services:
        _start_proxy(launcher, keys, server, deadline)
    return hub


def _start_containerd(
    launcher: _Spawner, options: NodeOptions, layout: NodeLayout, suffix: str, deadline: float
) -> None:
    """containerd of one node, with every image imported; ``suffix`` names the second node's."""
    from . import images

    name = f"containerd{suffix}"
    config = layout.disk / "containerd.toml"
    # Only the first node's containerd reads /var/run/cdi: upstream's suite runs its kubelet plugin there.
    host_cdi = options.host_cdi and not suffix
    config.write_text(containerd_config(layout, options.pause_image, host_cdi))
    launcher._spawn(
        name,
        [f"--config={config}", "--log-level=warn"],
        0,
        options.bin_dir,
        loopback=False,
    )
    launcher._wait(
        name, lambda: _containerd_ready(options, layout), 30, deadline, str(layout.containerd_socket)
    )
    images.import_images(
        options.bin_dir / "ctr", str(layout.containerd_socket), options.images, launcher._log
    )


def _start_kubelet(
    launcher: _Spawner,
    options: NodeOptions,
    layout: NodeLayout,
    keys: Any,
    server: str,
    admin_ctx: ssl.SSLContext,
    deadline: float,
    node_name: str,
    suffix: str,
) -> None:
    """One node's kubelet, as ``system:node:<node_name>``, waited for until its Node is Ready."""
    from .launcher import _cert_user, free_port, write_kubeconfig

    kubeconfig = launcher.dir / "kubeconfigs" / f"node{suffix}.kubeconfig"
    write_kubeconfig(kubeconfig, server, keys.read("ca.crt"), _cert_user(keys, f"node{suffix}"))
    port, healthz = free_port(), free_port()
    kubelet_yaml = layout.disk / "kubelet.yaml"
    taints = [REAL_NODE_TAINT] if options.taint else []
    kubelet_yaml.write_text(
        yaml.safe_dump(
            kubelet_config(
                layout,
                keys.path("ca.crt"),
                port,
                healthz,
                taints,
                launcher.o.workload_claims,
                launcher.o.profile,
            ),
            sort_keys=False,
        )
    )
    name = f"kubelet{suffix}"
    launcher._spawn(
        name,
        [
            f"--config={kubelet_yaml}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={layout.kubelet_root}",
            f"--cert-dir={layout.disk / 'kubelet-pki'}",
            f"--hostname-override={node_name}",
            f"--node-ip={layout.node_ip}",
            f"--node-labels={REAL_NODE_LABEL}=true",
            f"--v={launcher.o.verbosity}",
        ],
        healthz,
        loopback=False,
    )
    node_url = f"{server}/api/v1/nodes/{node_name}"
    launcher._wait(name, lambda: _node_ready(node_url, admin_ctx), 120, deadline, node_url)


def _start_registry(launcher: _Spawner, layout: NodeLayout, keys: Any, deadline: float) -> registry.Registry:
    from .launcher import free_port

    port = free_port()
    hub = registry.at(layout.disk, port)
    config = registry.write_files(
        hub,
        layout.registry_storage,
        port,
        keys.read("ca.crt"),
        keys.path("registry.crt"),
        keys.path("registry.key"),
    )
    # Its listen address is in the configuration file, which registry.config keeps on LOOPBACK.
    launcher._spawn(registry.BINARY, ["serve", str(config)], port, registry.BINARY_DIR, loopback=False)
    launcher._wait(registry.BINARY, lambda: registry.ready(hub), 30, deadline, f"https://{hub.address}/v2/")
    return hub


def _start_proxy(launcher: _Spawner, keys: Any, server: str, deadline: float) -> None:
    from .launcher import _cert_user, free_port, write_kubeconfig

    kubeconfig = launcher.dir / "kubeconfigs" / "proxy.kubeconfig"
    write_kubeconfig(kubeconfig, server, keys.read("ca.crt"), _cert_user(keys, "proxy"))
    healthz, metrics = free_port(), free_port()
    config = NodeLayout.of(launcher.dir).disk / "kube-proxy.yaml"
    config.write_text(yaml.safe_dump(proxy_config(kubeconfig, healthz, metrics), sort_keys=False))
    launcher._spawn("kube-proxy", [f"--config={config}", f"--v={launcher.o.verbosity}"], healthz)
    url = f"http://{LOOPBACK}:{healthz}/healthz"
    launcher._wait("kube-proxy", lambda: _http_status_ok(url), 60, deadline, url)


def _http_status_ok(url: str) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200, f"HTTP {resp.status}"
    except urllib.error.HTTPError as err:
        return False, f"HTTP {err.code}"
    except (OSError, urllib.error.URLError) as err:
        return False, str(err)


def _containerd_ready(options: NodeOptions, layout: NodeLayout) -> tuple[bool, str]:
    if not layout.containerd_socket.exists():
        return False, "no socket yet"
    try:
        ctr(options, layout, "version", timeout=10)
    except (NodeError, subprocess.TimeoutExpired) as err:
        return False, str(err)
    return True, "ok"


def _get_json(url: str, ctx: ssl.SSLContext) -> tuple[dict[str, Any] | None, str]:
    try:
        with urllib.request.urlopen(url, timeout=5, context=ctx) as resp:
            return json.loads(resp.read()), "ok"
    except urllib.error.HTTPError as err:
        return None, f"HTTP {err.code}"
    except (OSError, urllib.error.URLError, ValueError) as err:
        return None, str(err)


def _node_ready(url: str, ctx: ssl.SSLContext) -> tuple[bool, str]:
    node, why = _get_json(url, ctx)
    if node is None:
        return False, why
    for condition in node.get("status", {}).get("conditions", []):
        if condition.get("type") == "Ready":
            return condition.get(
                "status"
            ) == "True", f"Ready={condition.get('status')}: {condition.get('message')}"
    return False, "no Ready condition yet"


def _has_items(url: str, ctx: ssl.SSLContext) -> tuple[bool, str]:
    doc, why = _get_json(url, ctx)
    if doc is None:
        return False, why
    return bool(doc.get("items")), f"{len(doc.get('items') or [])} items"


def component_ready(layout: NodeLayout, name: str, port: int) -> bool:
    """Whether component ``name`` of the node of ``layout`` serves (a second node's name without
    its suffix)."""
    if name in ("kubelet", "kube-proxy"):
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/healthz", timeout=5) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False
    if name == "containerd":
        return layout.containerd_socket.exists()
    if name == registry.BINARY:
        return registry.ready(registry.at(layout.disk, port))[0]
    # The driver is ready when the kubelet has its registration socket.
    return any(layout.kubelet_root.glob("plugins_registry/*.sock"))


def prepare(
    say: Callable[[str], None],
    taint: bool = False,
    services: bool = False,
    extra_images: Sequence[Path] = (),
    host_cdi: bool = False,
    import_operator: bool = True,
    second_node: bool = False,
) -> NodeOptions:
    """Everything the node runs, installed or built (or reused from the cache); ``extra_images``
    are imported as well. Without ``import_operator`` the operator image is not imported: the
    node pulls it from its registry once something is pushed there."""
    from . import build, images

    ensure_debian_packages(say)
    containerd = build.build_containerd(log=say)
    operator = (images.operator_image(say),) if import_operator else ()
    archives = (images.pause_image(say), images.base_image(say), *operator, *extra_images)
    return NodeOptions(
        containerd.directory,
        archives,
        images.PAUSE_IMAGE,
        taint=taint,
        services=services,
        host_cdi=host_cdi,
        second_node=second_node,
    )
