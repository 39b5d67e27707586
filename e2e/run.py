"""``make run``: the main job on the embedded default.

1. Use the cluster that ``$KUBECONFIG`` names, or else start (or reuse) the local devcluster in
   ``.cluster/`` with two fake nodes.
2. Install ``crds/``.
3. Start every implemented operator as its own process, with readiness and metrics on
   127.0.0.1, and a small demo workload (a fake driver's devices and a pod whose claim comes
   from a template) so there is something to see.
4. Stream the operators' logs until Ctrl-C, then stop them (the devcluster keeps running;
   ``make cluster-down`` stops it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from e2e.cluster import build as build_mod
from e2e.cluster import launcher
from e2e.cluster.constants import DEFAULT_STATE_DIR, REPO_ROOT
from operators import OPERATOR_NAMES
from operators.cli import NotImplementedOperator, load_definition

DEMO = REPO_ROOT / "demo" / "claims-from-templates"


def _kubeconfig() -> tuple[str, str]:
    explicit = os.environ.get("KUBECONFIG")
    own = str(DEFAULT_STATE_DIR / "kubeconfig")
    if explicit and Path(explicit).resolve() != Path(own).resolve():
        return explicit, "kubectl"
    binaries = build_mod.build()
    options = launcher.UpOptions(
        directory=DEFAULT_STATE_DIR,
        binary_dir=binaries.directory,
        k8s_version=build_mod.k8s_version(),
        etcd_version=build_mod.etcd_version(),
    )
    state, existing = launcher.up(options)
    print(f"devcluster {'reused' if existing else 'started'} at {state.server}")
    return state.kubeconfig, str(binaries.directory / "kubectl")


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


def _demo_workload(kubectl: str, kubeconfig: str) -> None:
    """The first demo scenario: a fake driver's GPUs and two pods whose claims come from a template."""
    from demo import fakedriver
    from e2e.kube import Kube

    api = Kube(kubeconfig)
    try:
        fakedriver.apply(api, fakedriver.load(fakedriver.driver_file(DEMO)))
    finally:
        api.close()
    for manifest in sorted(DEMO.glob("[2-9]-*.yaml")):
        print(
            _kubectl(
                kubectl, kubeconfig, "apply", "--server-side", "--field-manager=dra-demo", "-f", str(manifest)
            ),
            end="",
        )


def _all_bound(pods: list[dict[str, Any]]) -> bool:
    return bool(pods) and all(p["spec"].get("nodeName") for p in pods)


def _show_demo(kubectl: str, kubeconfig: str) -> None:
    from e2e.kube import Kube, wait_for

    api = Kube(kubeconfig)
    try:
        pods = "/api/v1/namespaces/demo-templates/pods"
        wait_for(lambda: _all_bound(api.list(pods)), 60, "the demo pods to be bound")
    except AssertionError as err:
        print(f"demo: {err}")
    finally:
        api.close()
    print("\n$ kubectl get resourceclaims,pods -n demo-templates -o wide")
    print(
        _kubectl(kubectl, kubeconfig, "get", "resourceclaims,pods", "-n", "demo-templates", "-o", "wide"),
        end="",
    )


def _pump(name: str, proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        print(f"[{name}] {line}", end="")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _start_operator(name: str, kubeconfig: str, address: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "operators",
            "run",
            name,
            f"--kubeconfig={kubeconfig}",
            f"--metrics-bind-address={address}",
            f"--health-probe-bind-address={address}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO_ROOT,
    )
    print(f"{name}: running, metrics and probes on http://{address}")
    threading.Thread(target=_pump, args=(name, proc), daemon=True).start()
    return proc


def main() -> int:
    kubeconfig, kubectl = _kubeconfig()
    crds = REPO_ROOT / "crds"
    print(
        _kubectl(
            kubectl, kubeconfig, "apply", "--server-side", "--field-manager=dra-operators", "-k", str(crds)
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
    _demo_workload(kubectl, kubeconfig)
    shown = os.path.relpath(kubeconfig, REPO_ROOT) if kubeconfig.startswith(str(REPO_ROOT)) else kubeconfig
    procs: dict[str, subprocess.Popen[str]] = {}
    # A supervisor's SIGTERM stops the operators as Ctrl-C does, rather than orphaning them, and
    # so does either while the demo is still being shown.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        for index, name in enumerate(implemented):
            procs[name] = _start_operator(name, kubeconfig, f"127.0.0.1:{18080 + index}")
        if "resourceclaim" in procs:
            _show_demo(kubectl, kubeconfig)
        print(f"\nThe operators keep running; Ctrl-C stops them. KUBECONFIG={shown}")
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
