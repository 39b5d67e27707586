"""Starts and stops a devcluster: etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
and (unless the cluster has fake nodes only) one real node: containerd, kubelet and the test DRA
driver (``realnode``).

Every component runs as a plain process in its own session (process group) on 127.0.0.1,
with its output in ``<state>/logs/<component>.log``. ``state.json`` records pids, ports and
binaries, so ``down`` (possibly from another process) signals only what it started: it checks
that each recorded pid still runs the recorded binary before signalling its group.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from . import pki, realnode
from . import registry as registries
from .constants import (
    DEFAULT_PROFILE,
    LOOPBACK,
    SERVICE_CLUSTER_IP_RANGE,
    binding_conditions_on,
    feature_gates_flag,
    kcm_controllers,
    runtime_config_flag,
)

COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")
NODE_COMPONENTS = ("docker-registry", "containerd", "kubelet", "dra-test-driver", "kube-proxy")
SECOND_NODE_COMPONENTS = tuple(realnode.SECOND_NODE_PROGRAMS)
CONTROL_PLANE_USERS = {"kube-scheduler": "scheduler", "kube-controller-manager": "controller-manager"}
ADDRESS_FLAGS = ("bind-address", "advertise-address", "-urls")
PORT_RETRIES = 3
PROBE_INTERVAL = 0.3
LOG_TAIL_LINES = 40


class ClusterError(RuntimeError):
    pass


# Components outlive the Launcher object; their Popen handles stay here so that the process
# that started them can reap them in ``down`` (and Python does not warn about lost children).
_children: dict[int, subprocess.Popen[bytes]] = {}


@dataclass
class ComponentState:
    pid: int
    binary: str
    port: int
    log: str
    args: list[str] = field(default_factory=list)


@dataclass
class ClusterState:
    dir: str
    mode: str
    k8s_version: str
    etcd_version: str
    binary_dir: str
    server: str
    kubeconfig: str
    binding_timeout: str | None
    feature_gates: str
    owner_pid: int
    components: dict[str, ComponentState]
    # The real node's name, or None for a cluster of fake nodes only.
    node: str | None = None
    node_bin_dir: str | None = None
    # The workload claims gates and the PodGroup API are on (absent from older state files: off).
    workload_claims: bool = False
    # constants.PROFILES (absent from older state files: the lab profile, the only one there was).
    profile: str = DEFAULT_PROFILE
    # The real node's registry (host:port), which its containerd trusts; None without a real node.
    registry: str | None = None
    # The second real node's name, or None (absent from older state files: none).
    second_node: str | None = None

    @classmethod
    def load(cls, directory: Path) -> ClusterState | None:
        path = directory / "state.json"
        if not path.is_file():
            return None
        raw = json.loads(path.read_text())
        raw["components"] = {k: ComponentState(**v) for k, v in raw["components"].items()}
        return cls(**raw)

    @property
    def node_layout(self) -> realnode.NodeLayout:
        return realnode.NodeLayout.of(Path(self.dir))

    @property
    def node_layouts(self) -> dict[str, realnode.NodeLayout]:
        """Each real node's layout by the name of its containerd component."""
        return _node_layouts(Path(self.dir), self.node is not None, self.second_node is not None)

    @property
    def node_registry(self) -> registries.Registry | None:
        if self.registry is None:
            return None
        return registries.at(self.node_layout.disk, int(self.registry.rsplit(":", 1)[1]))

    def save(self) -> None:
        path = Path(self.dir) / "state.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.rename(path)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    """A plain GET: the status and body, the error's status and body, or 0 and why it failed."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except (OSError, urllib.error.URLError) as err:
        return 0, str(err)


def check_loopback(component: str, args: Sequence[str], allowed: Sequence[str] = ()) -> None:
    """Refuse any address-carrying flag whose value is not 127.0.0.1 (or one of ``allowed``: the
    real node's bridge address, which exists on this machine only)."""
    for arg in args:
        if not arg.startswith("--") or "=" not in arg:
            continue
        flag, value = arg[2:].split("=", 1)
        if not any(flag.endswith(suffix) for suffix in ADDRESS_FLAGS):
            continue
        for part in value.split(","):
            host = part.split("://", 1)[-1].rsplit(":", 1)[0] if "://" in part or ":" in part else part
            if "=" in host:  # --initial-cluster=name=url
                host = host.split("=", 1)[1].split("://", 1)[-1].rsplit(":", 1)[0]
            if host != LOOPBACK and host not in allowed:
                raise ClusterError(f"{component}: {flag}={value} is not on {LOOPBACK}; refusing to start")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(
    path: Path, server: str, ca: bytes, user: dict[str, str], name: str = "devcluster"
) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": _b64(ca)}}],
        "users": [{"name": f"{name}-user", "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-user"}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    os.chmod(path, 0o600)


def _cert_user(keys: pki.Pki, stem: str) -> dict[str, str]:
    return {
        "client-certificate-data": _b64(keys.read(f"{stem}.crt")),
        "client-key-data": _b64(keys.read(f"{stem}.key")),
    }


def _ssl_context(keys: pki.Pki, client: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(keys.path("ca.crt")))
    if client:
        ctx.load_cert_chain(str(keys.path("admin.crt")), str(keys.path("admin.key")))
    return ctx


def _http_ok(url: str, ctx: ssl.SSLContext | None) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(url, timeout=5, context=ctx) as resp:
            body = resp.read(4096).decode(errors="replace")
            return resp.status == 200, f"{resp.status} {body[:200]}"
    except urllib.error.HTTPError as err:
        return False, f"HTTP {err.code}"
    except (OSError, urllib.error.URLError) as err:
        return False, str(err)


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _proc_exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces and
    parentheses); empty when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def process_alive(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child nobody has reaped yet)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far; 0 once it is gone."""
    fields = _stat(pid)
    # utime and stime are fields 14 and 15 of proc(5), counted from the pid.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def _runs(pid: int, binary: str) -> bool:
    exe = _proc_exe(pid)
    if exe is None or not process_alive(pid):
        return False
    return os.path.realpath(exe) == os.path.realpath(binary)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@dataclass
class UpOptions:
    directory: Path
    binary_dir: Path
    k8s_version: str
    etcd_version: str
    upstream_dra: bool = False
    # DRAWorkloadResourceClaims and GenericWorkload on every component, the PodGroup API served.
    workload_claims: bool = False
    # constants.PROFILES: lab (the newest version's alpha DRA gates and APIs) or upstream's defaults.
    profile: str = DEFAULT_PROFILE
    binding_timeout: str | None = None
    kcm_controllers: str | None = None
    extra_args: dict[str, list[str]] = field(default_factory=dict)
    fake_nodes: int = 0
    # The real node (containerd, kubelet, test driver); None for fake nodes only.
    node: realnode.NodeOptions | None = None
    timeout: float = 300.0
    verbosity: int = 1
    # Components get a parent-death signal, so a killed owner (pytest) leaves nothing behind.
    die_with_parent: bool = False


class Launcher:
    def __init__(self, options: UpOptions, say: Callable[[str], None] = print) -> None:
        self.o = options
        self.dir = options.directory
        self.say = say
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.components: dict[str, ComponentState] = {}
        self.allowed_hosts: tuple[str, ...] = ()

    # -- files ----------------------------------------------------------------------------

    def _prepare_dir(self) -> pki.Pki:
        logs = self.dir / "logs"
        if logs.exists():
            prev = self.dir / "logs.prev"
            shutil.rmtree(prev, ignore_errors=True)
            logs.rename(prev)
        for sub in ("pki", "etcd", "kubeconfigs", "bin"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        logs.mkdir(parents=True)
        keys = pki.generate(self.dir / "pki", self.allowed_hosts)
        (self.dir / "bin").mkdir()
        (self.dir / "kubeconfigs").mkdir()
        for name in ("kubectl", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd"):
            (self.dir / "bin" / name).symlink_to(self.o.binary_dir / name)
        return keys

    def _log(self, text: str) -> None:
        with open(self.dir / "logs" / "launcher.log", "a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")

    # -- processes ------------------------------------------------------------------------

    def _spawn(
        self, name: str, args: list[str], port: int, binary_dir: Path | None = None, loopback: bool = True
    ) -> None:
        """Start component ``name``, the binary of that name (the second node's ``kubelet-2``: a kubelet)."""
        args = args + [a for a in self.o.extra_args.get(name, [])]
        if loopback:
            check_loopback(name, args, self.allowed_hosts)
        program = realnode.SECOND_NODE_PROGRAMS.get(name, name)
        binary = str((binary_dir or self.o.binary_dir) / program)
        log_path = self.dir / "logs" / f"{name}.log"
        self._log(f"start {name}: {' '.join(args)}")
        proc = _start_process(binary, args, log_path, self.dir, self.o.die_with_parent, binary_dir)
        self.procs[name] = proc
        self.components[name] = ComponentState(proc.pid, binary, port, str(log_path), args)

    def _wait(
        self, name: str, check: Callable[[], tuple[bool, str]], limit: float, deadline: float, url: str
    ) -> None:
        end = min(time.monotonic() + limit, deadline)
        last = "not probed"
        while time.monotonic() < end:
            for other, proc in self.procs.items():
                code = proc.poll()
                if code is not None:
                    log_path = self.dir / "logs" / f"{other}.log"
                    raise ClusterError(
                        f"{other} exited with code {code} during start; last log lines:\n{_tail(log_path)}"
                    )
            ok, last = check()
            if ok:
                return
            time.sleep(PROBE_INTERVAL)
        raise ClusterError(
            f"{name} not ready within {limit:.0f}s: {url}: {last}\nlast log lines:\n"
            f"{_tail(self.dir / 'logs' / f'{name}.log')}"
        )

    def stop_started(self) -> None:
        nodes = _node_layouts(
            self.dir, self.o.node is not None, bool(self.o.node and self.o.node.second_node)
        )
        shim = str(self.o.node.shim) if self.o.node else None
        _stop_components({n: self.components[n] for n in self.procs}, nodes, shim, self.procs)
        self.procs.clear()

    # -- the sequence ---------------------------------------------------------------------

    def up(self) -> ClusterState:
        for attempt in range(PORT_RETRIES + 1):
            try:
                return self._up_once()
            except ClusterError as err:
                self.stop_started()
                if "address already in use" in str(err) and attempt < PORT_RETRIES:
                    self.say(f"port collision, retrying with new ports ({err.args[0].splitlines()[0]})")
                    continue
                raise
        raise AssertionError("unreachable")

    def _up_once(self) -> ClusterState:
        started = time.monotonic()
        deadline = started + self.o.timeout
        api_host = LOOPBACK
        if self.o.node is not None:
            layout = realnode.prepare_host(self.dir, self.o.node, self.o.binary_dir / "kube-proxy")
            if self.o.node.services:
                # Pods reach the API server through the kubernetes Service, whose endpoint is the
                # advertised address; a loopback one is not a valid endpoint.
                api_host = layout.node_ip
                self.allowed_hosts = (layout.node_ip,)
        keys = self._prepare_dir()
        v = f"--v={self.o.verbosity}"
        etcd_client, etcd_peer, api_port, sched_port, kcm_port = (free_port() for _ in range(5))
        server = f"https://{api_host}:{api_port}"
        gates = feature_gates_flag(self.o.workload_claims, self.o.profile)
        runtime_config = runtime_config_flag(self.o.workload_claims, self.o.profile)
        # Upstream's defaults name neither flag, as a managed cluster's API server does not.
        settings = [f"--feature-gates={gates}"] if gates else []

        self._spawn(
            "etcd",
            [
                "--name=devcluster",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls=http://{LOOPBACK}:{etcd_client}",
                f"--advertise-client-urls=http://{LOOPBACK}:{etcd_client}",
                f"--listen-peer-urls=http://{LOOPBACK}:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://{LOOPBACK}:{etcd_peer}",
                f"--initial-cluster=devcluster=http://{LOOPBACK}:{etcd_peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            etcd_client,
        )
        etcd_url = f"http://{LOOPBACK}:{etcd_client}/health"
        self._wait("etcd", lambda: _http_ok(etcd_url, None), 30, deadline, etcd_url)

        p = keys.path
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers=http://{LOOPBACK}:{etcd_client}",
                f"--bind-address={api_host}",
                f"--advertise-address={api_host}",
                f"--secure-port={api_port}",
                f"--tls-cert-file={p('serving.crt')}",
                f"--tls-private-key-file={p('serving.key')}",
                f"--client-ca-file={p('ca.crt')}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={p('sa.pub')}",
                f"--service-account-signing-key-file={p('sa.key')}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                # Node first: the real node's kubelet acts as system:node:<name>, as on a real cluster.
                "--authorization-mode=Node,RBAC",
                f"--kubelet-client-certificate={p('admin.crt')}",
                f"--kubelet-client-key={p('admin.key')}",
                # The node's name does not resolve; its InternalIP is the bridge address.
                "--kubelet-preferred-address-types=InternalIP",
                "--allow-privileged=true",
                "--disable-admission-plugins=TaintNodesByCondition",
                f"--endpoint-reconciler-type={'lease' if api_host != LOOPBACK else 'none'}",
                *([f"--runtime-config={runtime_config}"] if runtime_config else []),
                *settings,
                v,
            ],
            api_port,
        )
        admin_ctx = _ssl_context(keys, client=True)
        readyz = f"{server}/readyz"
        self._wait("kube-apiserver", lambda: _http_ok(readyz, admin_ctx), 120, deadline, readyz)

        kubeconfig = self.dir / "kubeconfig"
        write_kubeconfig(kubeconfig, server, keys.read("ca.crt"), _cert_user(keys, "admin"))
        for stem in CONTROL_PLANE_USERS.values():
            write_kubeconfig(
                self.dir / "kubeconfigs" / f"{stem}.kubeconfig",
                server,
                keys.read("ca.crt"),
                _cert_user(keys, stem),
            )
        sched_kc = self.dir / "kubeconfigs" / "scheduler.kubeconfig"
        kcm_kc = self.dir / "kubeconfigs" / "controller-manager.kubeconfig"
        (self.dir / "scheduler.yaml").write_text(
            yaml.safe_dump(self._scheduler_config(sched_kc), sort_keys=False)
        )

        self._spawn(
            "kube-scheduler",
            [
                f"--config={self.dir / 'scheduler.yaml'}",
                f"--authentication-kubeconfig={sched_kc}",
                f"--authorization-kubeconfig={sched_kc}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={sched_port}",
                f"--tls-cert-file={p('serving.crt')}",
                f"--tls-private-key-file={p('serving.key')}",
                *settings,
                v,
            ],
            sched_port,
        )
        controllers = self.o.kcm_controllers or kcm_controllers(self.o.upstream_dra, self.o.k8s_version)
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={kcm_kc}",
                f"--authentication-kubeconfig={kcm_kc}",
                f"--authorization-kubeconfig={kcm_kc}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={kcm_port}",
                f"--tls-cert-file={p('serving.crt')}",
                f"--tls-private-key-file={p('serving.key')}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--root-ca-file={p('ca.crt')}",
                f"--service-account-private-key-file={p('sa.key')}",
                f"--controllers={controllers}",
                *settings,
                v,
            ],
            kcm_port,
        )
        ca_ctx = _ssl_context(keys, client=False)
        for name, port in (("kube-scheduler", sched_port), ("kube-controller-manager", kcm_port)):
            url = f"https://{LOOPBACK}:{port}/healthz"
            self._wait(name, functools.partial(_http_ok, url, ca_ctx), 60, deadline, url)
        sa_url = f"{server}/api/v1/namespaces/default/serviceaccounts/default"
        self._wait("kube-controller-manager", lambda: _http_ok(sa_url, admin_ctx), 60, deadline, sa_url)
        hub = realnode.start(self, self.o.node, keys, server, admin_ctx, deadline) if self.o.node else None

        state = ClusterState(
            dir=str(self.dir),
            mode="upstream-dra" if self.o.upstream_dra else "default",
            k8s_version=self.o.k8s_version,
            etcd_version=self.o.etcd_version,
            binary_dir=str(self.o.binary_dir),
            server=server,
            kubeconfig=str(kubeconfig),
            binding_timeout=self.o.binding_timeout,
            feature_gates=gates,
            owner_pid=os.getpid(),
            components=self.components,
            node=realnode.NODE_NAME if self.o.node else None,
            second_node=realnode.SECOND_NODE_NAME if self.o.node and self.o.node.second_node else None,
            node_bin_dir=str(self.o.node.bin_dir) if self.o.node else None,
            registry=hub.address if hub else None,
            workload_claims=self.o.workload_claims,
            profile=self.o.profile,
        )
        state.save()
        self._log(f"ready in {time.monotonic() - started:.1f}s")
        return state

    def _scheduler_config(self, kubeconfig: Path) -> dict[str, Any]:
        profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
        # Where binding conditions are off, the scheduler refuses the argument and no binding waits.
        if self.o.binding_timeout and binding_conditions_on(self.o.k8s_version, self.o.profile):
            profile["pluginConfig"] = [
                {
                    "name": "DynamicResources",
                    "args": {
                        "apiVersion": "kubescheduler.config.k8s.io/v1",
                        "kind": "DynamicResourcesArgs",
                        "bindingTimeout": self.o.binding_timeout,
                    },
                }
            ]
        return {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "leaderElection": {"leaderElect": False},
            "profiles": [profile],
        }


def _start_process(
    binary: str,
    args: list[str],
    log_path: Path,
    cwd: Path,
    die_with_parent: bool,
    path_prefix: Path | None = None,
) -> subprocess.Popen[bytes]:
    env = None
    if path_prefix is not None:
        # containerd finds its shim on PATH.
        env = dict(os.environ, PATH=f"{path_prefix}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [binary, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_set_pdeathsig if die_with_parent else None,
            cwd=cwd,
            env=env,
        )
    _children[proc.pid] = proc
    return proc


def stop_component(directory: Path, name: str) -> None:
    """Stop one component (fault-injection tests: an API server outage)."""
    state = ClusterState.load(directory)
    if state is None or name not in state.components:
        raise ClusterError(f"no {name} in the devcluster at {directory}")
    comp = state.components[name]
    _terminate(comp.pid, comp.binary)


def start_component(directory: Path, name: str, timeout: float = 120.0, die_with_parent: bool = True) -> None:
    """Start a stopped component again with its recorded arguments and port, and wait until ready."""
    with _locked(directory):
        state = ClusterState.load(directory)
        if state is None or name not in state.components:
            raise ClusterError(f"no {name} in the devcluster at {directory}")
        comp = state.components[name]
        proc = _start_process(
            comp.binary, comp.args, Path(comp.log), directory, die_with_parent, Path(comp.binary).parent
        )
        comp.pid = proc.pid
        state.save()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"{name} exited with code {proc.returncode}:\n{_tail(Path(comp.log))}")
        if component_health(state)[name]["ready"]:
            return
        time.sleep(PROBE_INTERVAL)
    raise ClusterError(f"{name} not ready within {timeout:.0f}s after restart")


def compact_etcd(directory: Path) -> int:
    """Compact etcd's history up to its current revision, and return that revision.

    A watch that resumes from any earlier resourceVersion is then answered 410 Gone, whatever
    kube-apiserver's watch cache holds: the fault-injection tests' way to make a watch gap.
    """
    state = ClusterState.load(directory)
    if state is None or "etcd" not in state.components:
        raise ClusterError(f"no etcd in the devcluster at {directory}")
    base = f"http://{LOOPBACK}:{state.components['etcd'].port}/v3/kv"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{base}/{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            answer: dict[str, Any] = json.load(resp)
        return answer

    # Any read answers with the store's revision in its header; the key is one that is never set.
    revision = int(post("range", {"key": _b64(b"\0")})["header"]["revision"])
    post("compaction", {"revision": revision, "physical": True})
    return revision


def _set_pdeathsig() -> None:
    import ctypes

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def _terminate(
    pid: int, binary: str, proc: subprocess.Popen[bytes] | None = None, grace: float = 15.0
) -> None:
    proc = proc or _children.get(pid)
    if proc is None and not _runs(pid, binary):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if proc is not None:
            if proc.poll() is not None:
                break
        elif not _runs(pid, binary):
            break
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        _children.pop(pid, None)
    else:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        end = time.monotonic() + 5
        while _runs(pid, binary) and time.monotonic() < end:
            time.sleep(0.1)


def _node_layouts(directory: Path, node: bool, second_node: bool) -> dict[str, realnode.NodeLayout]:
    layouts = {"containerd": realnode.NodeLayout.of(directory)} if node else {}
    if second_node:
        layouts[f"containerd{realnode.SECOND_NODE_SUFFIX}"] = realnode.NodeLayout.second(directory)
    return layouts


def _stop_components(
    components: dict[str, ComponentState],
    nodes: dict[str, realnode.NodeLayout],
    shim: str | None,
    procs: dict[str, subprocess.Popen[bytes]] | None = None,
) -> None:
    """Started last, stopped first: the nodes' processes before the control plane, and the
    containers' processes before their containerd, which would leave them running. Then whatever
    each node left on the machine (mounts, the bridge, cgroups) goes. ``nodes``: each real node's
    layout by the name of its containerd component."""
    for name in reversed(list(components)):
        comp = components[name]
        if name in nodes:
            realnode.stop_containers(nodes[name])
        proc = (procs or {}).get(name)
        if proc is not None or _runs(comp.pid, comp.binary) or comp.pid in _children:
            _terminate(comp.pid, comp.binary, proc)
    for layout in nodes.values():
        realnode.teardown_host(layout, shim, print)
    proxy = components.get("kube-proxy")
    if proxy is not None:
        realnode.cleanup_proxy_rules(Path(proxy.binary))


def down(directory: Path) -> bool:
    """Stop the devcluster in ``directory``; False when nothing was running."""
    with _locked(directory):
        state = ClusterState.load(directory)
        if state is None:
            return False
        any_running = any(_runs(c.pid, c.binary) for c in state.components.values())
        shim = f"{state.node_bin_dir}/{realnode.SHIM}" if state.node else None
        _stop_components(state.components, state.node_layouts, shim)
        for entry in (
            "state.json",
            "pki",
            "etcd",
            "kubeconfigs",
            "bin",
            "kubeconfig",
            "scheduler.yaml",
            "node",
            realnode.SECOND_NODE_DIR,
        ):
            path = directory / entry
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            elif path.exists() or path.is_symlink():
                path.unlink()
        return any_running


def component_health(state: ClusterState) -> dict[str, dict[str, Any]]:
    keys = pki.Pki(Path(state.dir) / "pki")
    result: dict[str, dict[str, Any]] = {}
    for name, comp in state.components.items():
        alive = _runs(comp.pid, comp.binary)
        ready = False
        if alive:
            if name in NODE_COMPONENTS:
                ready = realnode.component_ready(state.node_layout, name, comp.port)
            elif name in SECOND_NODE_COMPONENTS:
                layout = realnode.NodeLayout.second(Path(state.dir))
                ready = realnode.component_ready(layout, realnode.SECOND_NODE_PROGRAMS[name], comp.port)
            elif name == "etcd":
                ready = _http_ok(f"http://{LOOPBACK}:{comp.port}/health", None)[0]
            elif name == "kube-apiserver":
                # Where it serves: loopback, or the services bridge's address with SERVICES=1.
                host = urlsplit(state.server).hostname or LOOPBACK
                ready = _http_ok(f"https://{host}:{comp.port}/readyz", _ssl_context(keys, True))[0]
            else:
                ready = _http_ok(f"https://{LOOPBACK}:{comp.port}/healthz", _ssl_context(keys, False))[0]
        result[name] = {"pid": comp.pid, "alive": alive, "ready": ready, "port": comp.port, "log": comp.log}
    return result


def status(directory: Path) -> tuple[int, dict[str, Any]]:
    """Exit code (0 running, 3 not running, 4 degraded) and the ``status --json`` document."""
    state = ClusterState.load(directory)
    if state is None:
        return 3, {"running": False, "dir": str(directory)}
    comps = component_health(state)
    alive = [c["alive"] for c in comps.values()]
    doc = {
        "running": any(alive),
        "mode": state.mode,
        "dir": state.dir,
        "kubeconfig": state.kubeconfig,
        "server": state.server,
        "k8s_version": state.k8s_version,
        "etcd_version": state.etcd_version,
        "binding_timeout": state.binding_timeout,
        "feature_gates": state.feature_gates,
        "workload_claims": state.workload_claims,
        "profile": state.profile,
        "registry": state.registry,
        "components": comps,
    }
    if not any(alive):
        return 3, doc
    if not all(c["alive"] and c["ready"] for c in comps.values()):
        return 4, doc
    return 0, doc


def describe(mode: str, workload_claims: bool, k8s_version: str = "", profile: str = DEFAULT_PROFILE) -> str:
    """What a cluster was started with, as status and the reuse check name it."""
    setup = f"{mode} mode" + (", workload claims" if workload_claims else "")
    return f"{k8s_version} {profile}, {setup}" if k8s_version else setup


def up(options: UpOptions, say: Callable[[str], None] = print) -> tuple[ClusterState, bool]:
    """Start, or report the healthy cluster already running in the same mode (second value True)."""
    with _locked(options.directory):
        code, doc = status(options.directory)
        wanted = "upstream-dra" if options.upstream_dra else "default"
        if code == 0:
            running = describe(doc["mode"], doc["workload_claims"], doc["k8s_version"], doc["profile"])
            if running != describe(wanted, options.workload_claims, options.k8s_version, options.profile):
                raise ClusterError(
                    f"a devcluster in {running} is running in {options.directory}; "
                    "run make cluster-down first"
                )
            existing = ClusterState.load(options.directory)
            assert existing is not None
            return existing, True
        if code in (3, 4) and ClusterState.load(options.directory) is not None:
            say("cleaning up a stale devcluster state")
    if ClusterState.load(options.directory) is not None:
        down(options.directory)
    with _locked(options.directory):
        launcher = Launcher(options, say)
        try:
            state = launcher.up()
        except BaseException:
            launcher.stop_started()
            raise
        return state, False
