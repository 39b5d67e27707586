"""``make run``: the main job on the embedded default.

1. Use the cluster that ``$KUBECONFIG`` names, or else start (or reuse) the local devcluster in
   ``.cluster/`` with its real node (``NODE=fake``: fake nodes only).
2. Install ``crds/``.
3. Start every implemented operator as its own process, with readiness and metrics on
   127.0.0.1, each logging to a file under the cluster's state directory, and a small demo
   workload: on a cluster with the real node two pods whose claims come from a template and
   whose containers print the device the test driver prepared for them; elsewhere the first
   demo story with a fake driver's devices.
4. Show one status line per operator and the demo, then wait for Ctrl-C and stop the operators
   (the devcluster keeps running; ``make cluster-down`` stops it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devcluster import realnode
from devcluster.cluster import ensure_devcluster
from devcluster.constants import DEFAULT_PROFILE, DEFAULT_STATE_DIR, REPO_ROOT
from operators import OPERATOR_NAMES
from operators.cli import NotImplementedOperator, load_definition

DEMO = REPO_ROOT / "demo" / "claims-from-templates"
REAL_NODE_DEMO = REPO_ROOT / "e2e" / "make-run"
READY_TIMEOUT = 90.0


@dataclass(frozen=True)
class Target:
    kubeconfig: str
    kubectl: str
    state_dir: Path  # operator logs go to its logs/operators/


def _shown(path: Path | str) -> str:
    text = str(path)
    return os.path.relpath(text, REPO_ROOT) if text.startswith(str(REPO_ROOT) + "/") else text


def _target() -> Target:
    explicit = os.environ.get("KUBECONFIG")
    own = str(DEFAULT_STATE_DIR / "kubeconfig")
    if explicit and Path(explicit).resolve() != Path(own).resolve():
        parent = Path(explicit).resolve().parent
        state_dir = parent if (parent / "state.json").is_file() else DEFAULT_STATE_DIR
        return Target(explicit, "kubectl", state_dir)
    real_node = os.environ.get("NODE") != "fake"
    workload_claims = bool(os.environ.get("WORKLOAD_CLAIMS"))
    cluster = ensure_devcluster(
        DEFAULT_STATE_DIR,
        real_node=real_node,
        workload_claims=workload_claims,
        k8s_version=os.environ.get("K8S_VERSION") or None,
        profile=os.environ.get("PROFILE") or DEFAULT_PROFILE,
    )
    state = cluster.state
    print(f"devcluster {'reused' if cluster.existing else 'started'} at {state.server}")
    if cluster.existing and real_node and state.node is None:
        print(
            "this devcluster has no real node (it was started with NODE=fake); make cluster-down, then again"
        )
    return Target(state.kubeconfig, cluster.kubectl, DEFAULT_STATE_DIR)


def _kubectl(kubectl: str, kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _has_real_node(kubeconfig: str) -> bool:
    """The cluster runs the test driver (the devcluster's real node), so demo pods really run."""
    from devcluster.kube import Kube

    api = Kube(kubeconfig)
    try:
        slices = api.list("/apis/resource.k8s.io/v1/resourceslices")
    finally:
        api.close()
    return any(s["spec"].get("driver") == realnode.DRIVER_NAME for s in slices)


def _demo_workload(kubectl: str, kubeconfig: str, real_node: bool) -> str:
    """Apply the demo; returns its namespace. With the real node, two pods whose claims come from
    a template run there; elsewhere the first demo story with a fake driver's GPUs."""
    if real_node:
        folder, manifests = REAL_NODE_DEMO, sorted(REAL_NODE_DEMO.glob("[1-9]-*.yaml"))
    else:
        from demo import fakedriver
        from devcluster.kube import Kube

        api = Kube(kubeconfig)
        try:
            fakedriver.apply(api, fakedriver.load(fakedriver.driver_file(DEMO)))
        finally:
            api.close()
        folder, manifests = DEMO, sorted(DEMO.glob("[2-9]-*.yaml"))
    for manifest in manifests:
        print(
            _kubectl(
                kubectl, kubeconfig, "apply", "--server-side", "--field-manager=dra-demo", "-f", str(manifest)
            ),
            end="",
        )
    return "demo-make-run" if folder == REAL_NODE_DEMO else "demo-templates"


def _settled(pods: list[dict[str, Any]], real_node: bool) -> bool:
    if real_node:
        return bool(pods) and all(p.get("status", {}).get("phase") == "Running" for p in pods)
    return bool(pods) and all(p["spec"].get("nodeName") for p in pods)


def _show_demo(kubectl: str, kubeconfig: str, namespace: str, real_node: bool) -> None:
    from devcluster.kube import Kube, wait_for

    api = Kube(kubeconfig)
    pods: list[dict[str, Any]] | None = None
    try:
        path = f"/api/v1/namespaces/{namespace}/pods"

        def settled() -> list[dict[str, Any]] | None:
            found = api.list(path)
            return found if _settled(found, real_node) else None

        pods = wait_for(
            settled,
            120 if real_node else 60,
            "the demo pods to run" if real_node else "the demo pods to be bound",
        )
    except AssertionError as err:
        print(f"demo: {err}")
    finally:
        api.close()
    print(f"\n$ kubectl get resourceclaims,pods -n {namespace} -o wide")
    print(_kubectl(kubectl, kubeconfig, "get", "resourceclaims,pods", "-n", namespace, "-o", "wide"), end="")
    if not real_node:
        return
    for pod in sorted(p["metadata"]["name"] for p in pods or []):
        print(f"\n$ kubectl logs -n {namespace} {pod}")
        print(_kubectl(kubectl, kubeconfig, "logs", "-n", namespace, pod), end="")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _start_operator(name: str, kubeconfig: str, address: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "operators",
                "run",
                name,
                f"--kubeconfig={kubeconfig}",
                f"--metrics-bind-address={address}",
                f"--health-probe-bind-address={address}",
                # Probes and metrics share the loopback listener of a local run: plain HTTP.
                "--metrics-secure=false",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
        )


def _ready(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _report_status(procs: dict[str, subprocess.Popen[bytes]], addresses: dict[str, str], logs: Path) -> None:
    """One line per operator once it is ready (or has failed), in start order."""
    pending = dict(procs)
    deadline = time.monotonic() + READY_TIMEOUT
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            code = pending[name].poll()
            if code is not None:
                print(f"{name}: exited with code {code}; see {_shown(logs / f'{name}.log')}")
            elif _ready(addresses[name]):
                print(f"{name}: ready, metrics and probes on http://{addresses[name]}")
            else:
                continue
            del pending[name]
        time.sleep(0.2)
    for name in pending:
        print(f"{name}: not ready after {READY_TIMEOUT:.0f} s; see {_shown(logs / f'{name}.log')}")


def main() -> int:
    target = _target()
    kubeconfig, kubectl = target.kubeconfig, target.kubectl
    # The CRDs, and the operators' namespace (the bindingattacher keeps its ledger there).
    for kustomization in (REPO_ROOT / "crds", REPO_ROOT / "manifests" / "namespace"):
        print(
            _kubectl(
                kubectl,
                kubeconfig,
                "apply",
                "--server-side",
                "--field-manager=dra-operators",
                "-k",
                str(kustomization),
            ),
            end="",
        )
    implemented = []
    for name in OPERATOR_NAMES:
        try:
            load_definition(name)
            implemented.append(name)
        except NotImplementedOperator:
            print(f"{name}: not implemented yet, skipped")
    real_node = _has_real_node(kubeconfig)
    namespace = _demo_workload(kubectl, kubeconfig, real_node)
    logs = target.state_dir / "logs" / "operators"
    logs.mkdir(parents=True, exist_ok=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    addresses = {name: f"127.0.0.1:{18080 + index}" for index, name in enumerate(implemented)}
    # A supervisor's SIGTERM stops the operators as Ctrl-C does, rather than orphaning them, and
    # so does either while the demo is still being shown.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        print(f"\noperator logs: {_shown(logs)}/<name>.log (follow them with: tail -f {_shown(logs)}/*.log)")
        for name in implemented:
            procs[name] = _start_operator(name, kubeconfig, addresses[name], logs / f"{name}.log")
        _report_status(procs, addresses, logs)
        if "resourceclaim" in procs:
            _show_demo(kubectl, kubeconfig, namespace, real_node)
        print(f"\nThe operators keep running; Ctrl-C stops them. KUBECONFIG={_shown(kubeconfig)}")
        while procs and all(p.poll() is None for p in procs.values()):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    failed = [n for n, p in procs.items() if p.returncode not in (0, -signal.SIGTERM)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
