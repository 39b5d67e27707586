"""``python -m e2e.conformance`` (``make test-conformance``): upstream's DRA e2e suite against our
operators and against the in-tree controllers, on fresh devclusters, spec for spec.

Each mode gets a devcluster of its own in ``<dir>/<mode>``: the real node, untainted, with the
suite's images and ``/var/run/cdi``. ``ours``: the in-tree DRA controllers off and the operators
installed from the shipped manifests as users install them (``e2e/conformance/install``, which
adds the image built here and the eviction guard); ``upstream``: the in-tree controllers on and
no operator. The suite's selection runs on ginkgo's parallel processes; JUnit and the log of
each mode, and the table of both, go to ``test-artifacts/conformance/``.

A spec that passes with the in-tree controllers and fails with ours is a defect of ours: the
exit status says so. Where only ``ours`` runs (CI), the in-tree results come from the baseline
kept in this directory (``baseline-<version>.json``), which ``--write-baseline`` refreshes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from devcluster import build as cluster_build
from devcluster import launcher
from devcluster.cluster import Devcluster, ensure_devcluster
from devcluster.constants import DEFAULT_PROFILE, PROFILES, REPO_ROOT, check_profile

from . import build, results
from .selection import SELECTIONS, Selection

HERE = Path(__file__).resolve().parent
INSTALL = HERE / "install"
ARTIFACTS = REPO_ROOT / "test-artifacts" / "conformance"
DEFAULT_DIR = REPO_ROOT / ".conformance"
MODES = ("ours", "upstream")
DEPLOYMENTS = ("resourceclaim", "devicetaint", "poolstatus", "bindingattacher", "taintselector")
INSTALL_TIMEOUT = 300.0


@dataclass(frozen=True)
class Options:
    modes: tuple[str, ...]
    selection: Selection
    procs: int
    directory: Path
    timeout_minutes: int
    keep: bool
    write_baseline: bool
    k8s_version: str | None = None
    profile: str = DEFAULT_PROFILE

    @property
    def version(self) -> str:
        return cluster_build.k8s_version(self.k8s_version)

    @property
    def label_filter(self) -> str:
        # Where the cluster runs with upstream's default gates, a spec that needs a gate that is off
        # by default fails in both modes and says nothing about the controllers; upstream's own
        # default-settings jobs leave such specs out by this label.
        if self.profile == "lab":
            return self.selection.label_filter
        return f"({self.selection.label_filter}) && !Feature:OffByDefault"


def baseline_path(version: str, profile: str, selection: Selection) -> Path:
    configuration = version if profile == "lab" else f"{version}-{profile}"
    return HERE / f"baseline-{configuration}-{selection.baseline_name}.json"


def _say(line: str) -> None:
    print(line, flush=True)


def start_cluster(mode: str, options: Options, images: tuple[Path, ...]) -> Devcluster:
    directory = options.directory / f"{mode}-{options.selection.name}"
    # Fresh: objects left by an earlier run would change what the suite sees.
    launcher.down(directory)
    shutil.rmtree(directory, ignore_errors=True)
    return ensure_devcluster(
        directory,
        upstream_dra=mode == "upstream",
        workload_claims=options.selection.workload_claims,
        second_node=options.selection.second_node,
        k8s_version=options.k8s_version,
        profile=options.profile,
        real_node=True,
        services=True,
        extra_images=images,
        host_cdi=True,
        die_with_parent=True,
        say=_say,
        build_log=_say,
    )


def install_operators(cluster: Devcluster) -> float:
    """``kubectl apply -k`` of the install, and the seconds until every Deployment is Available."""
    kubeconfig = cluster.state.kubeconfig
    started = time.monotonic()
    _kubectl(cluster, "apply", "--server-side", "-k", str(INSTALL))
    for name in DEPLOYMENTS:
        _kubectl(
            cluster,
            "wait",
            "--for=condition=Available",
            f"--timeout={INSTALL_TIMEOUT:.0f}s",
            "-n",
            "dra-operators",
            f"deployment/dra-operators-{name}",
            timeout=INSTALL_TIMEOUT + 30,
        )
    _say(f"operators Available {time.monotonic() - started:.0f} s after kubectl apply -k ({kubeconfig})")
    return time.monotonic() - started


def _kubectl(cluster: Devcluster, *args: str, timeout: float = 120) -> str:
    proc = subprocess.run(
        [cluster.kubectl, f"--kubeconfig={cluster.state.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def run_suite(mode: str, cluster: Devcluster, binaries: build.SuiteBinaries, options: Options) -> Path:
    """The selection on ginkgo's parallel processes; the JUnit report's path."""
    report = ARTIFACTS / f"{mode}-{options.selection.name}.xml"
    log = ARTIFACTS / f"{mode}-{options.selection.name}.log"
    selection = options.selection
    command = [
        str(binaries.ginkgo),
        "run",
        "--no-color",
        f"--procs={options.procs}",
        f"--timeout={options.timeout_minutes}m",
        f"--label-filter={options.label_filter}",
        f"--focus={selection.focus}",
        *([f"--skip={selection.skip()}"] if selection.skip() else []),
        # ginkgo puts a report's path under --output-dir, so the name alone.
        f"--output-dir={ARTIFACTS}",
        f"--junit-report={report.name}",
        str(binaries.suite),
        "--",
        f"-kubeconfig={cluster.state.kubeconfig}",
        f"-kubelet-root-dir={cluster.state.node_layout.kubelet_root}",
        f"-report-dir={ARTIFACTS / mode}",
    ]
    _say(f"{mode}: running the {selection.name} selection on {options.procs} processes (log: {log})")
    started = time.monotonic()
    with open(log, "w") as out:
        subprocess.run(
            command, stdout=out, stderr=subprocess.STDOUT, timeout=options.timeout_minutes * 60 + 300
        )
    _say(f"{mode}: done in {time.monotonic() - started:.0f} s")
    return report


def run(options: Options) -> int:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    version = options.version
    baseline = baseline_path(version, options.profile, options.selection)
    if "upstream" not in options.modes and not baseline.is_file():
        # Without the in-tree results a failing spec is no defect of ours and the run could not fail.
        _say(
            f"no in-tree baseline {baseline.relative_to(REPO_ROOT)}: run both modes first"
            f" (make test-conformance K8S_VERSION={version} PROFILE={options.profile})"
        )
        return 1
    binaries = build.build(version, log=_say)
    images = build.suite_images(binaries, say=_say)
    outcomes: dict[str, dict[str, str]] = {}
    seconds: dict[str, float] = {}
    for mode in options.modes:
        started = time.monotonic()
        cluster = start_cluster(mode, options, images)
        try:
            if mode == "ours":
                install_operators(cluster)
            outcomes[mode] = results.read_junit(run_suite(mode, cluster, binaries, options))
        finally:
            if not options.keep:
                launcher.down(Path(cluster.state.dir))
        seconds[mode] = time.monotonic() - started
    if "upstream" in outcomes:
        if options.write_baseline and options.selection.baseline_name == options.selection.name:
            results.write_baseline(
                baseline, version, options.selection.name, outcomes["upstream"], options.profile
            )
            _say(f"baseline written: {baseline}")
    else:
        # The baseline covers a wider selection: only the specs this run selected are compared.
        ran = {spec for spec, outcome in outcomes.get("ours", {}).items() if outcome != results.SKIPPED}
        outcomes["ours"] = {spec: outcomes["ours"][spec] for spec in ran}
        outcomes["upstream"] = {s: o for s, o in results.read_baseline(baseline).items() if s in ran}
        _say(f"in-tree results from {baseline.relative_to(REPO_ROOT)}")
    table = results.Table(outcomes.get("upstream", {}), outcomes.get("ours", {}))
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    text = table.markdown(f"{version} ({options.profile})", options.selection.name, stamp, seconds)
    (ARTIFACTS / f"table-{options.selection.name}.md").write_text(text)
    (ARTIFACTS / f"table-{options.selection.name}.json").write_text(
        json.dumps(
            {
                "version": version,
                "profile": options.profile,
                "date": stamp,
                "seconds": seconds,
                **table.as_json(),
            },
            indent=2,
        )
        + "\n"
    )
    print(text)
    regressions = table.regressions()
    for spec in regressions:
        _say(f"DEFECT: passes with the in-tree controllers, not with ours: {spec}")
    if "ours" in outcomes and not outcomes["ours"]:
        _say("no spec ran with our operators")
        return 1
    return 1 if regressions else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.conformance", description=__doc__)
    parser.add_argument("--modes", default=",".join(MODES), help="ours, upstream or both (comma-separated)")
    parser.add_argument("--selection", choices=sorted(SELECTIONS), default="full")
    parser.add_argument("--procs", type=int, default=4, help="ginkgo's parallel processes")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where the devclusters live")
    parser.add_argument("--timeout-minutes", type=int, default=60)
    parser.add_argument("--keep", action="store_true", help="leave the devclusters running")
    parser.add_argument(
        "--k8s-version",
        default=None,
        help="the Kubernetes version of the devclusters and of the suite (default: the newest built)",
    )
    parser.add_argument("--profile", choices=PROFILES, default=DEFAULT_PROFILE)
    parser.add_argument(
        "--write-baseline", action="store_true", help="store the in-tree results as the baseline"
    )
    args = parser.parse_args(argv)
    modes = tuple(mode.strip() for mode in args.modes.split(",") if mode.strip())
    unknown = set(modes) - set(MODES)
    if unknown or not modes:
        parser.error(f"--modes takes {', '.join(MODES)}")
    options = Options(
        modes,
        SELECTIONS[args.selection],
        args.procs,
        args.dir,
        args.timeout_minutes,
        args.keep,
        args.write_baseline,
        args.k8s_version,
        args.profile,
    )
    try:
        check_profile(
            options.profile, options.version, cluster_build.NEWEST.version, options.selection.workload_claims
        )
    except ValueError as err:
        parser.error(str(err))
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
