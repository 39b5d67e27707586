"""Starting the devcluster, or finding it running: the one way every caller does it.

``make cluster-up``, ``make run``, ``make demo``, the e2e backends and the benchmarks differ only in
the options they pass (mode, node, binding timeout, extra flags, where the state lives), so a fix to
the start-up (the build, the real node's parts, the launcher) reaches all of them at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import build as build_mod
from . import launcher, realnode
from .constants import DEFAULT_PROFILE, check_profile
from .nodes import create_fake_nodes_sync


@dataclass(frozen=True)
class Devcluster:
    state: launcher.ClusterState
    # A healthy cluster of the same mode and options already ran in the directory and is reused as it is.
    existing: bool
    kubectl: str


def ensure_devcluster(
    directory: Path,
    *,
    upstream_dra: bool = False,
    workload_claims: bool = False,
    k8s_version: str | None = None,
    profile: str = DEFAULT_PROFILE,
    real_node: bool = False,
    taint_node: bool = False,
    services: bool = False,
    binding_timeout: str | None = None,
    kcm_controllers: str | None = None,
    extra_args: dict[str, list[str]] | None = None,
    fake_nodes: int = 0,
    extra_images: tuple[Path, ...] = (),
    host_cdi: bool = False,
    import_operator: bool = True,
    second_node: bool = False,
    timeout: float = launcher.UpOptions.timeout,
    verbosity: int = launcher.UpOptions.verbosity,
    die_with_parent: bool = False,
    build_log: Callable[[str], None] = print,
    say: Callable[[str], None] = print,
) -> Devcluster:
    """The devcluster in ``directory``: started, or reused when it already runs in that mode and
    with the same ``workload_claims`` (the DRAWorkloadResourceClaims and GenericWorkload gates on
    every component, the PodGroup API served), ``k8s_version`` (None: the newest the devcluster
    builds) and ``profile`` (constants.PROFILES); a running one that differs is an error.

    ``real_node``: one node with kubelet, containerd and the test DRA driver (``taint_node`` keeps
    other pods off it; ``services``: its pods reach the API server and Services; ``extra_images``
    are imported into its containerd; ``host_cdi``: it reads CDI specs from /var/run/cdi too, as
    upstream's DRA e2e suite needs; without ``import_operator`` its containerd has no operator
    image until it pulls one from the node's registry; ``second_node``: a second real node, a
    kubelet and containerd with the same images and no driver). ``fake_nodes`` are created once, when
    the cluster starts. ``build_log`` receives the build's progress and ``say`` the node's and
    the launcher's, so a caller can silence the build alone.
    """
    version = build_mod.k8s_version(k8s_version)
    try:
        check_profile(profile, version, build_mod.NEWEST.version, workload_claims)
    except ValueError as err:
        raise launcher.ClusterError(str(err)) from err
    binaries = build_mod.build(log=build_log, version=version)
    node = (
        realnode.prepare(
            say,
            taint=taint_node,
            services=services,
            extra_images=extra_images,
            host_cdi=host_cdi,
            import_operator=import_operator,
            second_node=second_node,
        )
        if real_node
        else None
    )
    options = launcher.UpOptions(
        directory=directory,
        binary_dir=binaries.directory,
        k8s_version=version,
        etcd_version=build_mod.etcd_version(version),
        upstream_dra=upstream_dra,
        workload_claims=workload_claims,
        profile=profile,
        binding_timeout=binding_timeout,
        kcm_controllers=kcm_controllers,
        extra_args=extra_args or {},
        fake_nodes=fake_nodes,
        node=node,
        timeout=timeout,
        verbosity=verbosity,
        die_with_parent=die_with_parent,
    )
    state, existing = launcher.up(options, say=say)
    if fake_nodes and not existing:
        create_fake_nodes_sync(state.kubeconfig, fake_nodes)
    return Devcluster(state, existing, str(binaries.directory / "kubectl"))
