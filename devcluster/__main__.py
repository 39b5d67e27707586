"""``python -m devcluster``: build the binaries, start/stop/inspect a devcluster."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import build as build_mod
from . import chartdocs, dist, gomod, images, launcher, realnode, registry, release
from .cluster import ensure_devcluster
from .constants import DEFAULT_PROFILE, DEFAULT_STATE_DIR, PROFILES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a devcluster (build the binaries if needed)")
    up.add_argument("--upstream-dra", action="store_true", help="keep the in-tree DRA controllers on")
    up.add_argument(
        "--workload-claims",
        action="store_true",
        help="the DRAWorkloadResourceClaims and GenericWorkload feature gates on every component, "
        "and the PodGroup API (scheduling.k8s.io/v1beta1) served",
    )
    up.add_argument(
        "--k8s-version",
        default=os.environ.get("K8S_VERSION") or None,
        help="the Kubernetes version of every component (default: the newest the devcluster builds)",
    )
    up.add_argument(
        "--profile",
        choices=PROFILES,
        default=os.environ.get("PROFILE") or DEFAULT_PROFILE,
        help="lab: the newest version's alpha DRA gates and beta/alpha APIs on; defaults: upstream's "
        "default gates and no --runtime-config, as on managed clusters",
    )
    up.add_argument("--dir", type=Path, default=DEFAULT_STATE_DIR)
    up.add_argument("--fake-nodes", type=int, default=int(os.environ.get("FAKE_NODES") or 0))
    up.add_argument(
        "--node",
        choices=("real", "fake"),
        default=os.environ.get("NODE") or "real",
        help="real: one node with kubelet, containerd and the test DRA driver (the default); "
        "fake: fake nodes only, pods never start",
    )
    up.add_argument(
        "--second-node",
        action="store_true",
        help="with --node real: a second real node (kubelet and containerd, no test driver), for "
        "upstream's specs that need two ready nodes",
    )
    up.add_argument(
        "--services",
        action="store_true",
        help="pods reach the API server and Services (the API server on the node IP, kube-proxy): "
        "for installing the operators from manifests/",
    )
    up.add_argument("--binding-timeout", default=os.environ.get("DEVCLUSTER_BINDING_TIMEOUT") or None)
    up.add_argument("--kcm-controllers", default=None, help="replace kube-controller-manager's --controllers")
    up.add_argument("--extra-arg", action="append", default=[], metavar="COMPONENT=--flag=value")
    up.add_argument("--timeout", type=float, default=float(os.environ.get("DEVCLUSTER_START_TIMEOUT", "300")))
    for name in ("down", "env"):
        p = sub.add_parser(name)
        p.add_argument("--dir", type=Path, default=DEFAULT_STATE_DIR)
    h = sub.add_parser(
        "device-health",
        help="the real node's test driver reports DEVICE as HEALTH to the kubelet and taints it in its slice",
    )
    h.add_argument("--dir", type=Path, default=DEFAULT_STATE_DIR)
    h.add_argument("device", nargs="?", help="gpu-0, gpu-1, ...")
    h.add_argument("health", nargs="?", choices=realnode.DEVICE_HEALTH)
    h.add_argument(
        "--taint", metavar="KEY[=VALUE]:EFFECT", help="as kubectl taint writes it; EFFECT may be None"
    )
    h.add_argument(
        "--clear", action="store_true", help="DEVICE (every device without one) Healthy and untainted"
    )
    st = sub.add_parser("status")
    st.add_argument("--dir", type=Path, default=DEFAULT_STATE_DIR)
    st.add_argument("--json", action="store_true")
    b = sub.add_parser("build", help="build or reuse the control-plane binaries")
    b.add_argument("--prune", action="store_true", help="remove other cache keys")
    b.add_argument("--k8s-version", default=os.environ.get("K8S_VERSION") or None)
    sub.add_parser(
        "build-node",
        help="the real node's parts: Debian packages (as root), containerd, the images",
    )
    sub.add_parser(
        "build-tools",
        help="build or reuse helm (the chart's tests, the release) and oras (the release's SBOM)",
    )
    ra = sub.add_parser(
        "release-artifacts",
        help="the image tarball, its SBOM and the packaged chart, into dist/; the image and the chart "
        "pushed to the registry of the devcluster in --dir when it runs with a real node",
    )
    ra.add_argument("--dir", type=Path, default=DEFAULT_STATE_DIR)
    d = sub.add_parser(
        "dist",
        help="the Python distributions, and the kubectl plugin alone with its krew archive, into dist/",
    )
    d.add_argument("--check", action="store_true", help="then twine check --strict the Python distributions")
    sub.add_parser("chart-readme", help="rewrite the values table of charts/dra-operators/README.md")
    g = sub.add_parser("gomod", help="regenerate devcluster/controlplane/go.mod and go.sum")
    g.add_argument("--k8s-version", required=True)
    g.add_argument(
        "--older",
        action="store_true",
        help="an older version: versions/<version>.mod and .sum in devcluster/controlplane and "
        "e2e/conformance",
    )
    return parser


def _extra_args(values: list[str]) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for value in values:
        component, sep, flag = value.partition("=")
        if not sep or component not in launcher.COMPONENTS or not flag.startswith("--"):
            raise SystemExit(
                f"--extra-arg {value!r}: expected COMPONENT=--flag=value, COMPONENT one of "
                f"{', '.join(launcher.COMPONENTS)}"
            )
        result.setdefault(component, []).append(flag)
    return result


def _device_health(args: argparse.Namespace, directory: Path) -> int:
    node = realnode.NodeLayout.of(directory)
    if not node.disk.is_dir():
        raise realnode.NodeError(f"no real node in {directory}")
    if args.clear:
        realnode.clear_device_health(node, args.device)
    elif args.device and args.health:
        taint = None
        if args.taint:
            key_value, _, effect = args.taint.rpartition(":")
            key, _, value = key_value.partition("=")
            taint = {"key": key, "value": value, "effect": effect}
        try:
            realnode.set_device_health(node, args.device, args.health, taint)
        except ValueError as err:
            raise SystemExit(f"error: {err}") from err
    else:
        raise SystemExit("error: DEVICE and HEALTH, or --clear")
    print(
        node.device_health.read_text() if node.device_health.exists() else "every device Healthy, no taints"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            result = build_mod.build(version=args.k8s_version)
            if args.prune:
                for removed in build_mod.prune(result.directory):
                    print(f"removed {removed}")
            print(result.directory)
            return 0
        if args.command == "build-node":
            prepared = realnode.prepare(print)
            print(prepared.bin_dir)
            # The release's other architectures too, which the registry tier publishes: built
            # here, they are not built inside the e2e phase's time limit.
            released = [images.ensure_operator(print, arch).archive for arch in images.RELEASE_ARCHITECTURES]
            for archive in dict.fromkeys((*prepared.images, *released)):
                print(archive)
            return 0
        if args.command == "release-artifacts":
            image, bom, chart = release.artifacts()
            state = launcher.ClusterState.load(args.dir.resolve())
            hub = state.node_registry if state is not None else None
            if hub is None or not registry.ready(hub)[0]:
                print(f"not pushed: no devcluster with a registry runs in {args.dir} (make cluster-up)")
                return 0
            published = release.publish(hub, image, chart, bom)
            print(
                f"image: {published.image}\nsbom: {published.repository}@{published.sbom_digest}\n"
                f"chart: {published.chart} --version {published.version}"
            )
            return 0
        if args.command == "dist":
            made = dist.build()
            if args.check:
                dist.check(made)
            return 0
        if args.command == "chart-readme":
            print(chartdocs.write_readme())
            return 0
        if args.command == "build-tools":
            print(build_mod.build_helm().directory / "helm")
            print(build_mod.build_oras().directory / "oras")
            return 0
        if args.command == "gomod":
            generated = (
                [f for w in gomod.WRAPPERS for f in gomod.generate_older(args.k8s_version, w)]
                if args.older
                else gomod.generate(args.k8s_version)
            )
            for finding in generated:
                print(finding)
            return 0
        directory = args.dir.resolve()
        if args.command == "up":
            started = time.monotonic()
            cluster = ensure_devcluster(
                directory,
                upstream_dra=args.upstream_dra,
                workload_claims=args.workload_claims,
                k8s_version=args.k8s_version,
                profile=args.profile,
                real_node=args.node == "real",
                second_node=args.second_node,
                services=args.services,
                binding_timeout=args.binding_timeout,
                kcm_controllers=args.kcm_controllers,
                extra_args=_extra_args(args.extra_arg),
                fake_nodes=args.fake_nodes,
                timeout=args.timeout,
                verbosity=int(os.environ.get("DEVCLUSTER_VERBOSITY", "1")),
            )
            state = cluster.state
            setup = launcher.describe(state.mode, state.workload_claims, state.k8s_version, state.profile)
            if cluster.existing:
                print(f"already running ({setup}) at {state.server}")
            else:
                print(
                    f"devcluster ({setup}) ready at {state.server} in "
                    f"{time.monotonic() - started:.1f}s; kubeconfig: {state.kubeconfig}"
                )
            return 0
        if args.command == "down":
            print("stopped" if launcher.down(directory) else "not running")
            return 0
        if args.command == "status":
            code, doc = launcher.status(directory)
            if args.json:
                print(json.dumps(doc, indent=2))
            else:
                label = {0: "running", 3: "not running", 4: "degraded"}[code]
                setup = (
                    launcher.describe(doc["mode"], doc["workload_claims"], doc["k8s_version"], doc["profile"])
                    if doc.get("server")
                    else ""
                )
                print(label + (f" ({setup}) at {doc['server']}" if setup else ""))
                for name, comp in doc.get("components", {}).items():
                    print(
                        f"  {name:<24} pid {comp['pid']:<8} alive={comp['alive']} ready={comp['ready']} "
                        f"port={comp['port']}"
                    )
            return code
        if args.command == "device-health":
            return _device_health(args, directory)
        if args.command == "env":
            print(f"export KUBECONFIG={directory / 'kubeconfig'}")
            print(f'export PATH="{directory / "bin"}:$PATH"')
            return 0
    except (launcher.ClusterError, build_mod.BuildError, gomod.GoModError, realnode.NodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
