"""``python -m demo`` (``make demo``): every scenario, one after the other, with real output.

1. The cluster: the one ``$KUBECONFIG`` names, or else the local control plane in ``.cluster/``
   (reused when it runs, started otherwise, as ``make run`` does).
2. The project's CRDs and the operators' namespace; then the operators the chosen scenarios need,
   plus the resourceclaim operator, which every cluster needs to release claims, each as its own
   process with the admin kubeconfig (logs under ``<state>/demo-logs/``).
3. Per scenario: clean up leftovers, print and run its commands with their output, clean up
   (``--keep`` leaves the last state for poking around; ``--clean`` only cleans up).

``--record`` also writes each run into its README's transcript block. Stop ``make run`` first:
two copies of an operator would act on the same objects.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from demo import cleanup, transcripts
from demo.player import Player, transcript
from demo.scenarios import SCENARIOS, Scenario
from devcluster.cluster import ensure_devcluster
from devcluster.constants import DEFAULT_STATE_DIR, REPO_ROOT
from devcluster.kube import Kube, WaitTimeout, wait_for
from devcluster.launcher import free_port, http_get

OPERATOR_NAMESPACE = "dra-operators"


@dataclass(frozen=True)
class Target:
    kubeconfig: str
    kubectl: str
    binding_timeout: str | None
    logs: Path


def _target() -> Target:
    explicit = os.environ.get("KUBECONFIG")
    own = DEFAULT_STATE_DIR / "kubeconfig"
    if explicit and Path(explicit).resolve() != own.resolve():
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise SystemExit("KUBECONFIG names a cluster, but there is no kubectl on $PATH")
        print(f"using the cluster of KUBECONFIG={explicit}; its in-tree DRA controllers must be off")
        return Target(explicit, kubectl, None, Path(explicit).resolve().parent / "dra-demo-logs")
    cluster = ensure_devcluster(DEFAULT_STATE_DIR)
    state = cluster.state
    print(f"local control plane {'reused' if cluster.existing else 'started'} at {state.server}")
    return Target(state.kubeconfig, cluster.kubectl, state.binding_timeout, DEFAULT_STATE_DIR / "demo-logs")


def _shown(path: Path) -> str:
    """Paths inside the checkout relative to it, as a user in the checkout types them."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def crd_names() -> list[str]:
    """``crd/<name>`` of every CRD that ``kubectl apply -k crds/`` installs."""
    listed = yaml.safe_load((REPO_ROOT / "crds" / "kustomization.yaml").read_text())["resources"]
    return [f"crd/{yaml.safe_load((REPO_ROOT / 'crds' / f).read_text())['metadata']['name']}" for f in listed]


def _setup(player: Player) -> None:
    """Apply the CRDs and the operators' namespace, and wait until the CRDs are served."""
    apply = "kubectl apply --server-side --force-conflicts --field-manager=dra-demo"
    for command in (f"{apply} -k crds/", f"{apply} -f manifests/namespace/namespace.yaml"):
        done = player.run(command)
        if done.returncode != 0:
            raise SystemExit(f"{command} failed:\n{done.stderr}")
    established = player.run(
        "kubectl wait --for=condition=Established --timeout=30s " + " ".join(crd_names())
    )
    if established.returncode != 0:
        raise SystemExit(f"the CRDs are not served:\n{established.stdout}{established.stderr}")


def _ready(proc: subprocess.Popen[bytes], address: str) -> bool:
    return proc.poll() is not None or http_get(f"http://{address}/readyz")[0] == 200


@contextlib.contextmanager
def _operators(names: Sequence[str], target: Target) -> Iterator[None]:
    """Start every operator at once (each takes a few seconds to list and watch), then wait for all."""
    target.logs.mkdir(parents=True, exist_ok=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    addresses: dict[str, str] = {}
    try:
        for name in names:
            addresses[name] = address = f"127.0.0.1:{free_port()}"
            extra: list[str] = []
            if name == "bindingattacher" and target.binding_timeout:
                extra = ["--binding-timeout", target.binding_timeout]  # the scheduler's, when known
            with open(target.logs / f"{name}.log", "wb") as out:
                procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "operators", "run", name, "--kubeconfig", target.kubeconfig,
                     "--metrics-bind-address", address, "--health-probe-bind-address", address,
                     "--metrics-secure=false", "--namespace", OPERATOR_NAMESPACE, *extra],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
                )  # fmt: skip
        for name, proc in procs.items():
            log = _shown(target.logs / f"{name}.log")
            try:
                wait_for(functools.partial(_ready, proc, addresses[name]), 60, f"the {name} operator")
            except WaitTimeout:
                raise SystemExit(f"the {name} operator did not become ready; see {log}") from None
            if proc.poll() is not None:
                raise SystemExit(f"the {name} operator exited with code {proc.returncode}; see {log}")
            print(f"operator {name}: ready (metrics and probes on http://{addresses[name]}, log {log})")
        yield
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _play(
    player: Player, api: Kube, scenario: Scenario, index: int, total: int, record: bool, keep: bool
) -> None:
    print(f"\n=== {index}/{total} {scenario.name}: {scenario.title} ===")
    print(f"    operators: {', '.join(scenario.operators)}; README: demo/{scenario.name}/README.md\n")
    cleanup.clean(api, scenario)
    started = time.monotonic()
    played = player.play(scenario)
    if record:
        transcripts.write(scenario.folder / "README.md", transcript(played))
    print(f"    ({time.monotonic() - started:.0f} s)")
    if not keep:
        cleanup.clean(api, scenario, wait=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "features", nargs="*", metavar="FEATURE", help=f"default: all of {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--record", action="store_true", help="write each run into its README")
    parser.add_argument("--keep", action="store_true", help="leave each scenario's objects in place")
    parser.add_argument("--clean", action="store_true", help="only remove what the scenarios created")
    parser.add_argument("--list", action="store_true", help="list the scenarios")
    args = parser.parse_args(argv)
    if args.list:
        for scenario in SCENARIOS.values():
            print(f"{scenario.name:<22} {scenario.title} ({', '.join(scenario.operators)})")
        return 0
    unknown = [f for f in args.features if f not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    chosen = [SCENARIOS[f] for f in args.features or SCENARIOS]
    target = _target()
    api = Kube(target.kubeconfig)
    player = Player(target.kubectl, target.kubeconfig, echo=lambda text: print(text))
    try:
        if args.clean:
            for scenario in chosen:
                cleanup.clean(api, scenario, say=print)
            return 0
        _setup(player)
        needed = ["resourceclaim", *(o for s in chosen for o in s.operators if o != "resourceclaim")]
        with _operators(list(dict.fromkeys(needed)), target):
            for index, scenario in enumerate(chosen, 1):
                _play(player, api, scenario, index, len(chosen), args.record, args.keep)
        shown = _shown(Path(target.kubeconfig))
        print(
            f"\nDone. The cluster keeps running (KUBECONFIG={shown}); make cluster-down stops the local one."
        )
        return 0
    finally:
        player.close()
        api.close()
