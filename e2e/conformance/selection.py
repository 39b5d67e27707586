"""Which of upstream's DRA specs run here, and why the others do not.

A selection is a ginkgo label filter plus regular expressions on the spec's text (and, for
``two-nodes``, a cluster with a second real node); the reasons for leaving specs out are data,
listed in docs/conformance.md.
Nothing here changes a spec: the suite runs unmodified, and a spec is either run or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Exclusion:
    pattern: str
    reason: str

    def matches(self, spec: str) -> bool:
        return re.search(self.pattern, spec) is not None


# Specs that cannot run on this machine, each with its reason. Specs that need more nodes than
# a selection's cluster has are not listed: the suite skips them itself ("2 ready nodes required");
# the two-nodes selection runs those that a second node without the driver's kubelet plugin serves.
CANNOT_RUN: tuple[Exclusion, ...] = (
    Exclusion(
        r"supports extended resources together with ResourceClaim"
        r"|process extended resources after device plugin uninstall|must prefer device plugin over DRA",
        "[Serial]: deploys upstream's sample device plugin, whose manifest mounts"
        " /var/lib/kubelet/device-plugins (the devcluster's kubelet keeps its root elsewhere) and"
        " whose image is not built here",
    ),
)

# The PodGroup specs need the DRAWorkloadResourceClaims and GenericWorkload gates and the PodGroup
# API, which the second pass's cluster has (WORKLOAD_CLAIMS=1).
WORKLOAD_CLAIMS = r"FeatureGate:DRAWorkloadResourceClaims"


@dataclass(frozen=True)
class Selection:
    name: str
    label_filter: str
    focus: str
    description: str
    workload_claims: bool = False
    # A second real node (devcluster's second_node): the suite finds two ready nodes.
    second_node: bool = False
    # The selection whose in-tree results this one is compared with when only ours runs.
    baseline: str = ""

    @property
    def baseline_name(self) -> str:
        return self.baseline or self.name

    def skip(self) -> str:
        patterns = [exclusion.pattern for exclusion in CANNOT_RUN]
        if not self.workload_claims:
            patterns.append(re.escape("[FeatureGate:DRAWorkloadResourceClaims]"))
        return "|".join(f"(?:{pattern})" for pattern in patterns)


FULL = Selection(
    "full",
    label_filter="DRA",
    focus=r"\[DRA\]",
    description="every [DRA] spec that can run on one node, without the PodGroup gates",
)
FULL_WORKLOAD_CLAIMS = Selection(
    "full-workload-claims",
    label_filter="DRA && FeatureGate:DRAWorkloadResourceClaims",
    focus=r"\[DRA\]",
    description="the PodGroup specs, on a cluster with the workload claims gates",
    workload_claims=True,
)
# What `make test` runs: the specs that exercise the replaced controllers (claims from
# templates, reservations, release and deallocation, eviction, pool status), not the kubelet's
# or the scheduler's own machinery.
CI = Selection(
    "ci",
    label_filter="DRA",
    focus=(
        r"\[DRA\] control plane (must deallocate|supports (simple|external|sharing|inline|reusing|init)"
        r"|runs a pod without|truncates the name|must be possible|must be impossible"
        r"|\[FeatureGate:DRAResourcePoolStatus\]|views)"
        r"|\[DRA\] kubelet .*(removes reservation|deletes generated claims|does not delete generated claims"
        r"|DeviceTaintRule evicts pod|NoExecute can be tolerated)"
        r"|CRUD Tests resource\.k8s\.io/v1 DeviceTaintRule"
        r"|must cleanup extended resource claims"
    ),
    description="the controller-focused subset that `make test` runs",
    baseline="full",
)
# The control-plane specs that need two ready nodes: their driver publishes a ResourceSlice per
# node from the test binary (its kubelet plugin off), so the second node needs no plugin. The kubelet
# variants ("on multiple nodes") do need one on each node, and upstream's suite mounts one kubelet
# root directory for all nodes, which two kubelets on one machine cannot share; they stay skipped.
TWO_NODES = Selection(
    "two-nodes",
    label_filter="DRA",
    focus=(
        r"\[DRA\] control plane (\[FeatureGate:DRAResourcePoolStatus\] should (clear NodeName|filter by pool"
        r"|not reprocess|populate status for all|return empty pools|set NodeName|truncate results)"
        r"|with (different ResourceSlices|node-local resources))"
    ),
    description="the control-plane specs that need two ready nodes, on a cluster with a second real node",
    second_node=True,
)
SELECTIONS = {selection.name: selection for selection in (FULL, FULL_WORKLOAD_CLAIMS, CI, TWO_NODES)}


def reason_not_run(spec: str) -> str | None:
    for exclusion in CANNOT_RUN:
        if exclusion.matches(spec):
            return exclusion.reason
    return None
