"""The e2e environment: cluster backends, restricted identities, and running operators.

Backends (chosen once per run, see ``e2e/backends.py``): a private devcluster (default), an
existing cluster (``--kubeconfig``), or kind (``--e2e-cluster=kind``, machines with Docker).
Operators under test run either in-process (a thread with its own event loop) or as a
subprocess, and by default under the ServiceAccount identity that ``manifests/`` grants them,
so the shipped RBAC is what the tests exercise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from devcluster import launcher, release
from devcluster.cluster import Devcluster
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from devcluster.launcher import free_port, http_get
from e2e.support import eviction_guard_kustomization, guard_refusal
from operators.dra import taintrules

OPERATOR_NAMESPACE = "dra-operators"
RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
STOP_GRACE = 20.0


@dataclass
class Cluster:
    kubeconfig: str
    server: str
    mode: str
    backend: str
    kubectl_path: str
    binding_timeout: str | None = None
    state: launcher.ClusterState | None = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dra-e2e-")))
    # What the node's registry serves for the deployed tiers to install (backends.deployed_devcluster).
    published: release.Published | None = None

    def kubectl_dra(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The ``kubectl dra`` plugin against this cluster, as a user runs it; not checked."""
        return subprocess.run(
            [sys.executable, "-m", "operators.kubectl_dra", *args, "--kubeconfig", self.kubeconfig],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=REPO_ROOT,
        )

    def kubectl(
        self,
        *args: str,
        timeout: float = 60,
        check: bool = True,
        input: str | None = None,
        kubeconfig: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self.kubectl_path, f"--kubeconfig={kubeconfig or self.kubeconfig}", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    @classmethod
    def of_devcluster(cls, devcluster: Devcluster) -> Cluster:
        state = devcluster.state
        return cls(
            kubeconfig=state.kubeconfig,
            server=state.server,
            mode=state.mode,
            backend="devcluster",
            kubectl_path=devcluster.kubectl,
            binding_timeout=state.binding_timeout,
            state=state,
        )

    @property
    def logs(self) -> dict[str, Path]:
        if self.state is None:
            return {}
        return {name: Path(comp.log) for name, comp in self.state.components.items()}


# -- restricted identities ------------------------------------------------------------------


def rbac_objects(cluster: Cluster, overlay: str = "") -> list[dict[str, Any]]:
    target = REPO_ROOT / "manifests" / overlay if overlay else REPO_ROOT / "manifests"
    rendered = cluster.kubectl("kustomize", str(target)).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc and doc.get("kind") in RBAC_KINDS]


def service_account_of(objects: Sequence[dict[str, Any]], operator: str) -> tuple[str, str]:
    for obj in objects:
        if obj["kind"] == "ServiceAccount" and operator in obj["metadata"]["name"]:
            return obj["metadata"].get("namespace", OPERATOR_NAMESPACE), obj["metadata"]["name"]
    raise AssertionError(f"manifests/ defines no ServiceAccount for {operator}")


def apply_rbac(cluster: Cluster, objects: Sequence[dict[str, Any]]) -> None:
    docs = "\n---\n".join(yaml.safe_dump(o) for o in objects)
    cluster.kubectl(
        "apply", "--server-side", "--field-manager=e2e-rbac", "--force-conflicts", "-f", "-", input=docs
    )


def token_kubeconfig(cluster: Cluster, api: Kube, namespace: str, service_account: str) -> str:
    """A kubeconfig with a fresh TokenRequest token (1 h) for the ServiceAccount."""
    review = api.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    cluster_entry = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster_entry],
        "users": [{"name": service_account, "user": {"token": review["status"]["token"]}}],
        "contexts": [
            {"name": service_account, "context": {"cluster": cluster_entry["name"], "user": service_account}}
        ],
        "current-context": service_account,
    }
    path = cluster.workdir / f"{namespace}-{service_account}-{time.monotonic_ns()}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    os.chmod(path, 0o600)
    return str(path)


# -- the eviction guard ---------------------------------------------------------------------------

EVICTION_GUARD_LABEL = "app.kubernetes.io/component=eviction-guard"
CLUSTER_WIDE_RULE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "e2e-eviction-guard-probe"},
    "spec": {"deviceSelector": {}, "taint": {"key": "dra-operators.test/probe", "effect": "NoExecute"}},
}


def served_rule_version(api: Kube) -> str | None:
    """The DeviceTaintRule version the cluster serves, newest first, as the operators pick it."""
    for version in taintrules.VERSIONS:
        document = api.get_or_none(f"/apis/resource.k8s.io/{version}")
        if document and any(r["name"] == taintrules.PLURAL for r in document.get("resources", [])):
            return version
    return None


@contextlib.contextmanager
def eviction_guard(cluster: Cluster) -> Iterator[None]:
    """The eviction guard installed for a whole session, from the component as docs/operate.md says,
    so every DeviceTaintRule and DeviceTaintSelector of every test passes through it. It is
    enforced once the API server's policy informer has it: a dry run that it refuses says so.
    Removed at the end only from an existing cluster that did not have it before."""
    present = cluster.kubectl(
        "get", "validatingadmissionpolicies", "-l", EVICTION_GUARD_LABEL, "-o", "name"
    ).stdout
    target = eviction_guard_kustomization(cluster.workdir / "eviction-guard")
    cluster.kubectl("apply", "--server-side", "--field-manager=e2e-eviction-guard", "-k", str(target))
    api = Kube(cluster.kubeconfig)
    try:
        # Probed through the rule version the cluster serves; where it serves none (1.35 and 1.36
        # by default) there is no rule to refuse.
        version = served_rule_version(api)
        if version is not None:
            rule = {**CLUSTER_WIDE_RULE, "apiVersion": f"resource.k8s.io/{version}"}
            wait_for(
                lambda: guard_refusal(api, f"/apis/resource.k8s.io/{version}/devicetaintrules", rule),
                60,
                "the eviction guard to refuse a NoExecute DeviceTaintRule with an empty selector",
            )
    finally:
        api.close()
    yield
    if cluster.backend == "existing" and not present.strip():
        cluster.kubectl("delete", "-k", str(target), "--ignore-not-found", check=False)


# -- running operators ------------------------------------------------------------------------

GUARD_METRIC = "dra_operators_in_tree_controller_detected"


@dataclass(frozen=True)
class GuardReading:
    """The coexistence guard's gauge, read from an operator just before it was stopped."""

    operator: str
    kubeconfig: str
    detected: tuple[str, ...]
    expected: bool


# Every reading of the session: in default mode (the in-tree DRA controllers off) the guard
# must never fire, and the session's end checks that it did not (e2e/conftest.py).
GUARD_READINGS: list[GuardReading] = []


def metric(text: str, name: str, /, **labels: str) -> float | None:
    """The value of one sample of a Prometheus text exposition, or None if absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def exported_names(metrics: str) -> set[str]:
    """Every series name an exposition declares, whether or not it has samples yet (a labelled
    counter has none until its first increment), with the suffixes of its type."""
    names: set[str] = set()
    for family in text_string_to_metric_families(metrics):
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("_sum", "_count"),
        }.get(family.type, ("",))
        names.update(family.name + suffix for suffix in suffixes)
        names.update(sample.name for sample in family.samples)
    return names


def in_tree_detected(metrics: str) -> tuple[str, ...]:
    """The in-tree controllers an operator's metrics say it has seen acting."""
    return tuple(
        sample.labels.get("controller", "")
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == GUARD_METRIC and sample.value != 0
    )


@dataclass
class RunningOperator:
    name: str
    mode: str
    metrics_url: str
    health_url: str
    log_path: Path
    kubeconfig: str
    process: subprocess.Popen[bytes] | None = None
    thread: threading.Thread | None = None
    loop: asyncio.AbstractEventLoop | None = None
    stop_event: asyncio.Event | None = None
    result: dict[str, Any] = field(default_factory=dict)
    stopped_by_fixture: bool = False
    killed: bool = False
    # Set by the tests that run an operator beside the in-tree controller on purpose.
    expects_in_tree: bool = False

    def metrics(self) -> str:
        status, text = http_get(self.metrics_url)
        assert status == 200, f"metrics endpoint answered {status}: {text[:200]}"
        return text

    def ready(self) -> bool:
        return http_get(self.health_url.replace("/healthz", "/readyz"))[0] == 200

    def leading(self) -> bool:
        """Ready as the Lease holder, not as a standby."""
        status, text = http_get(self.health_url.replace("/healthz", "/readyz"))
        return status == 200 and text.strip() == "ok"

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return self.thread is not None and self.thread.is_alive()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the whole process group (subprocess mode only): the crash tests."""
        assert self.process is not None, "kill() needs subprocess mode"
        self.stopped_by_fixture = True
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def _read_guard(self) -> None:
        if not self.alive():
            return
        status, text = http_get(self.metrics_url)
        if status == 200 and GUARD_METRIC in text:
            GUARD_READINGS.append(
                GuardReading(self.name, self.kubeconfig, in_tree_detected(text), self.expects_in_tree)
            )

    def stop(self) -> int | None:
        if not self.stopped_by_fixture:
            self._read_guard()
        self.stopped_by_fixture = True
        if self.process is not None:
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(STOP_GRACE)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait(10)
            return self.process.returncode
        if self.thread is not None and self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
            self.thread.join(STOP_GRACE + 10)
            assert not self.thread.is_alive(), f"in-process {self.name} did not stop"
            if "error" in self.result:
                raise AssertionError(f"in-process {self.name} failed: {self.result['error']!r}")
            return int(self.result.get("exit_code", 0))
        return None


def _common_args(name: str, kubeconfig: str, port: int, extra: Sequence[str]) -> list[str]:
    address = f"127.0.0.1:{port}"
    return [
        "run",
        name,
        "--kubeconfig",
        kubeconfig,
        "--metrics-bind-address",
        address,
        "--health-probe-bind-address",
        address,
        "--namespace",
        OPERATOR_NAMESPACE,
        # One loopback listener for probes and metrics: plain HTTP (the deployed tier scrapes
        # the secure /metrics of the shipped Deployments).
        "--metrics-secure=false",
        *extra,
    ]


def start_operator(
    name: str,
    kubeconfig: str,
    workdir: Path,
    mode: str = "subprocess",
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    ready_timeout: float = 60.0,
) -> RunningOperator:
    """Start an operator and wait until it is ready (or, with ``wait_ready=False``, only alive:
    a standby replica of a leader election never becomes ready)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = workdir / f"operator-{name}-{time.monotonic_ns()}.log"
    args = _common_args(name, kubeconfig, port, extra_args)
    op = RunningOperator(name, mode, f"{base}/metrics", f"{base}/healthz", log_path, kubeconfig)
    if mode == "subprocess":
        with open(log_path, "wb") as out:
            op.process = subprocess.Popen(
                [sys.executable, "-m", "operators", *args, "--log-format=json"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=REPO_ROOT,
                env={**os.environ, **(env or {})},
            )
    else:
        _start_in_process(op, args)

    def started() -> bool:
        if not op.alive():
            return True
        return op.ready() if wait_ready else http_get(op.health_url)[0] == 200

    try:
        wait_for(started, ready_timeout, f"{name} operator to become {'ready' if wait_ready else 'alive'}")
    except AssertionError:
        op.stop()
        raise AssertionError(f"{name} did not become ready; its log:\n{op.log()[-5000:]}") from None
    if not op.alive():
        error = op.result.get("error") or op.result.get("exit_code")
        raise AssertionError(f"{name} exited during start ({error!r}); its log:\n{op.log()[-5000:]}")
    return op


def start_operator_unready(
    name: str, kubeconfig: str, workdir: Path, extra_args: Sequence[str] = ()
) -> RunningOperator:
    return start_operator(name, kubeconfig, workdir, "subprocess", extra_args, wait_ready=False)


def _start_in_process(op: RunningOperator, args: list[str]) -> None:
    import argparse
    import logging

    from operators.cli import load_definition
    from operators.core import runtime
    from operators.core import settings as settings_mod
    from operators.core.eventloop import new_event_loop

    definition = load_definition(op.name)
    parser = argparse.ArgumentParser()
    settings_mod.add_arguments(parser, definition.settings_class)
    settings = settings_mod.from_arguments(definition.settings_class, parser.parse_args(args[2:]), environ={})
    handler = logging.FileHandler(op.log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    ready = threading.Event()

    def main() -> None:
        # As the CLI runs it (operators/cli.py): the runner cancels what is left, finishes the
        # async generators and closes the loop, so a stop that strands a task shows up in the log
        # instead of as transports open when the loop closes.
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                loop = runner.get_loop()
                op.loop = loop
                op.stop_event = asyncio.Event()
                ready.set()
                try:
                    op.result["exit_code"] = runner.run(
                        runtime.run(definition, settings, stop=op.stop_event, configure_logging=False)
                    )
                except BaseException as err:  # reported by stop()
                    op.result["error"] = err
                finally:
                    left = sorted(task.get_name() for task in asyncio.all_tasks(loop) if not task.done())
                    if left:
                        logging.getLogger("e2e.harness").warning("tasks left running at stop: %s", left)
        finally:
            logging.getLogger().removeHandler(handler)
            handler.close()

    op.thread = threading.Thread(target=main, name=f"operator-{op.name}", daemon=True)
    op.thread.start()
    ready.wait(10)


@contextlib.contextmanager
def operator_running(
    name: str,
    kubeconfig: str,
    workdir: Path,
    mode: str = "subprocess",
    extra_args: Sequence[str] = (),
    ready_timeout: float = 60.0,
) -> Iterator[RunningOperator]:
    op = start_operator(name, kubeconfig, workdir, mode, extra_args, ready_timeout=ready_timeout)
    try:
        yield op
    finally:
        crashed = op.process is not None and op.process.poll() is not None and not op.stopped_by_fixture
        code = op.stop()
        if crashed:
            raise AssertionError(f"{name} exited on its own with code {code}; its log:\n{op.log()[-5000:]}")
        if not op.killed and code not in (0, None):
            raise AssertionError(
                f"{name} exited with {code} after SIGTERM; a graceful stop exits 0:\n{op.log()[-3000:]}"
            )


def load_json_lines(text: str) -> list[dict[str, Any]]:
    result = []
    for line in text.splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            result.append(json.loads(line))
    return result
