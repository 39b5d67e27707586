"""The seven demo scenarios as data: for each folder, the commands a user types, in order.

A command is written exactly as the README shows it; :mod:`demo.player` runs it (``kubectl``
is the cluster's kubectl, ``python`` this interpreter, and ``kubectl dra`` the plugin). The
waits are ``kubectl wait`` commands, so a scenario that does not reach its README's outcome
fails where it stands. A step with ``until`` is re-run until its output shows the outcome, as a
user would re-run ``kubectl get`` a moment later.

``operators`` names what each scenario needs; ``namespace`` is the one its manifests create,
which :mod:`demo.cleanup` removes together with the cluster-scoped objects of the manifests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Step:
    say: str
    command: str
    until: Callable[[str], bool] | None = None
    within: float = 60.0


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    operators: tuple[str, ...]
    namespace: str
    steps: tuple[Step, ...]
    # Where its folder lives: demo/ for the stories; make run's own workload is elsewhere.
    home: Path = DEMO_DIR

    @property
    def folder(self) -> Path:
        return self.home / self.name

    @property
    def commands(self) -> list[str]:
        return [step.command for step in self.steps]

    def index(self, command: str) -> int:
        """The position of the step that runs ``command`` (tests stop there to look around)."""
        return self.commands.index(command)


def _driver(name: str, what: str) -> Step:
    return Step(f"The fake driver publishes {what}.", f"python -m demo.fakedriver apply demo/{name}")


def _apply(name: str, file: str, say: str) -> Step:
    return Step(say, f"kubectl apply -f demo/{name}/{file}")


def _scheduled(namespace: str, pods: str = "--all") -> Step:
    target = "pod --all" if pods == "--all" else f"pod/{pods}"
    return Step(
        "The scheduler allocates the devices and binds the pods to the fake node (no kubelet runs them).",
        f"kubectl wait --for=condition=PodScheduled {target} -n {namespace} --timeout=60s",
    )


def _claim_rows(output: str) -> int:
    return sum(1 for line in output.splitlines() if line.startswith("trainer-"))


TEMPLATES = Scenario(
    name="claims-from-templates",
    title="Claims from ResourceClaimTemplates",
    operators=("resourceclaim",),
    namespace="demo-templates",
    steps=(
        _driver("claims-from-templates", "a node with two GPUs"),
        _apply("claims-from-templates", "2-template.yaml", "A namespace and a ResourceClaimTemplate."),
        _apply("claims-from-templates", "3-pods.yaml", "Two pods that name the template."),
        Step(
            "The resourceclaim operator creates a claim per pod; the scheduler gives each a GPU, binds it.",
            "kubectl wait --for=condition=PodScheduled pod --all -n demo-templates --timeout=60s",
        ),
        Step(
            "One claim per pod, named <pod>-<claim entry>-<5 random characters>.",
            "kubectl get resourceclaims -n demo-templates",
        ),
        Step(
            "Each claim is owned by its pod and has a GPU of its own.",
            "kubectl get resourceclaims -n demo-templates -o custom-columns='"
            "CLAIM:.metadata.name,OWNER:.metadata.ownerReferences[0].name,"
            "DEVICE:.status.allocation.devices.results[0].device'",
        ),
        Step(
            "The pod's status records which claim it got.",
            "kubectl get pods -n demo-templates -o custom-columns='"
            "POD:.metadata.name,NODE:.spec.nodeName,CLAIM:.status.resourceClaimStatuses[0].resourceClaimName'",
        ),
        Step(
            "Delete one pod: the operator releases its claim and deletes it, and the GPU is free again.",
            "kubectl delete pod trainer-1 -n demo-templates",
        ),
        Step(
            "Only trainer-0's claim is left.",
            "kubectl get resourceclaims -n demo-templates",
            until=lambda out: _claim_rows(out) == 1 and "trainer-0-gpu-" in out,
        ),
    ),
)

EVICTION = Scenario(
    name="noexecute-eviction",
    title="NoExecute eviction, and a toleration that protects",
    operators=("devicetaint",),
    namespace="demo-eviction",
    steps=(
        _driver("noexecute-eviction", "a node with two GPUs"),
        _apply(
            "noexecute-eviction",
            "2-workloads.yaml",
            "Two pods with a claim each; only the monitor's claim tolerates example.com/maintenance.",
        ),
        _scheduled("demo-eviction"),
        _apply("noexecute-eviction", "3-rule.yaml", "Taint every GPU of the driver with NoExecute."),
        Step(
            "The devicetaint operator evicts the batch pod at once: condition DisruptionTarget, then delete.",
            "kubectl wait --for=condition=DisruptionTarget pod/batch -n demo-eviction --timeout=60s",
        ),
        Step(
            "Without a kubelet the evicted pod stays Terminating; the monitor tolerates the taint and stays.",
            "kubectl get pods -n demo-eviction",
        ),
        Step(
            "The rule reports when the eviction is over (at most ~20 s later, to outwait the scheduler).",
            "kubectl wait --for=condition=EvictionInProgress=false devicetaintrule/gpu-maintenance "
            "--timeout=60s",
        ),
        Step(
            "Its condition: Completed, with the number of pods evicted.",
            "kubectl get devicetaintrule gpu-maintenance -o custom-columns='"
            "RULE:.metadata.name,EVICTING:.status.conditions[0].status,"
            "REASON:.status.conditions[0].reason,MESSAGE:.status.conditions[0].message'",
        ),
        Step(
            "The eviction is explained in an Event on the pod.",
            "kubectl get events -n demo-eviction --field-selector "
            "involvedObject.name=batch,reason=DeviceTaintManagerEviction",
        ),
    ),
)

DRY_RUN = Scenario(
    name="dry-run",
    title="The effect None dry run: what would a NoExecute taint evict?",
    operators=("devicetaint",),
    namespace="demo-dry-run",
    steps=(
        _driver("dry-run", "a node with three GPUs"),
        _apply("dry-run", "2-workload.yaml", "An inference server on one of them."),
        _scheduled("demo-dry-run"),
        _apply("dry-run", "3-rule.yaml", "A rule with effect None: it taints nothing and evicts nothing."),
        Step(
            "The devicetaint operator answers once, in the rule's EvictionInProgress condition.",
            "kubectl wait --for=condition=EvictionInProgress=false devicetaintrule/drain-preview "
            "--timeout=60s",
        ),
        Step(
            "Its reason is NoEffect and its message the dry run's counts.",
            "kubectl get devicetaintrule drain-preview -o jsonpath="
            '\'{.status.conditions[0].reason}{": "}{.status.conditions[0].message}{"\\n"}\'',
        ),
        Step("Nothing was evicted.", "kubectl get pods -n demo-dry-run"),
        Step(
            "kubectl dra taint-preview runs the same dry run with a temporary rule and names the devices, "
            "claims and pods.",
            "kubectl dra taint-preview driver=gpu.dry-run.demo.example.com,pool=dry-run-node "
            "--key example.com/maintenance",
        ),
    ),
)

GPU_POOL = Scenario(
    name="gpu-pool-status",
    title="Pool status of a partitionable GPU pool",
    operators=("poolstatus",),
    namespace="demo-gpu-pool",
    steps=(
        _driver("gpu-pool-status", "a node with two 80Gi GPUs, each as one Full or two Half partitions"),
        _apply("gpu-pool-status", "2-workload.yaml", "A notebook takes half a GPU."),
        _scheduled("demo-gpu-pool"),
        Step(
            "Ask the poolstatus operator about the driver's pools.",
            "kubectl create -f demo/gpu-pool-status/3-request.yaml",
        ),
        Step(
            "It answers once, in the status.",
            "kubectl wait --for=condition=Complete rpsr/partitioned-gpus --timeout=60s",
        ),
        Step(
            "Six devices, one allocated; one more Full fits (on the untouched GPU), three more Halves.",
            "kubectl get rpsr/partitioned-gpus -o yaml",
        ),
        Step(
            "kubectl dra pools asks the same with a temporary request and draws the answer.",
            "kubectl dra pools --driver gpu.partitions.demo.example.com",
        ),
    ),
)

NIC_POOL = Scenario(
    name="shareable-nic-pool",
    title="Pool status of a shareable NIC pool",
    operators=("poolstatus",),
    namespace="demo-nic-pool",
    steps=(
        _driver("shareable-nic-pool", "a node with four NICs of 10Gi bandwidth that claims can share"),
        _apply("shareable-nic-pool", "2-workloads.yaml", "Three services ask for 6Gi, 6Gi and 10Gi."),
        _scheduled("demo-nic-pool"),
        Step(
            "No two of them fit on one NIC: three NICs are in use.",
            "kubectl get resourceclaims -n demo-nic-pool -o custom-columns='"
            "CLAIM:.metadata.name,NIC:.status.allocation.devices.results[0].device,"
            "BANDWIDTH:.status.allocation.devices.results[0].consumedCapacity.bandwidth'",
        ),
        Step("Ask the poolstatus operator.", "kubectl create -f demo/shareable-nic-pool/3-request.yaml"),
        Step("It answers once.", "kubectl wait --for=condition=Complete rpsr/shared-nics --timeout=60s"),
        Step(
            "One NIC fully available, two partially (4Gi left each), one full; 18Gi of 40Gi left.",
            "kubectl get rpsr/shared-nics -o jsonpath='{.status.pools[0].shareableSummary}{\"\\n\"}'",
        ),
        Step("The same, drawn by the plugin.", "kubectl dra pools --driver nic.shared.demo.example.com"),
    ),
)

BINDING = Scenario(
    name="binding-conditions",
    title="Binding conditions with bindsToNode",
    operators=("bindingattacher",),
    namespace="demo-fabric",
    steps=(
        _driver("binding-conditions", "two nodes and fabric-attached GPUs that either node can use"),
        _apply(
            "binding-conditions",
            "2-policy.yaml",
            "Tell the bindingattacher how to attach this driver's GPUs.",
        ),
        Step(
            "The policy is valid and the attacher may write this driver's claim status.",
            "kubectl wait --for=condition=Ready deviceattachpolicy/fabric-gpus --timeout=60s",
        ),
        Step(
            "Its columns: the action, Accepted, Authorized and Ready.",
            "kubectl get deviceattachpolicy fabric-gpus",
        ),
        _apply("binding-conditions", "3-workload.yaml", "A training pod with a claim for one fabric GPU."),
        Step(
            "The scheduler holds the pod until the GPU is attached (about 3 s), then binds it.",
            "kubectl wait --for=condition=PodScheduled pod/trainer -n demo-fabric --timeout=60s",
        ),
        Step(
            "bindsToNode: the claim's allocation names the node the scheduler chose.",
            "kubectl get resourceclaim fabric-gpu -n demo-fabric -o jsonpath="
            "'{.status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0]}{\"\\n\"}'",
        ),
        Step(
            "The attacher's report, in the shape the scheduler reads: attached=True, attach-failed=False.",
            "kubectl get resourceclaim fabric-gpu -n demo-fabric -o jsonpath="
            "'{range .status.devices[*].conditions[*]}"
            '{.type}={.status} ({.reason}) {.message}{"\\n"}{end}\'',
        ),
        Step("The pod is bound to that node.", "kubectl get pods -n demo-fabric -o wide"),
        Step(
            "The story in Events: the scheduler waited, the attacher attached.",
            "kubectl get events -n demo-fabric --sort-by=.metadata.creationTimestamp",
        ),
    ),
)

_HEALTH_RULES = "devicetaintrules -l app.kubernetes.io/managed-by=dra-operators-devicehealth"

DEVICE_HEALTH = Scenario(
    name="device-health",
    title="Device health remediation: an unhealthy GPU tainted, its pod evicted, the rule cleared",
    operators=("devicehealth", "devicetaint"),
    namespace="demo-health",
    steps=(
        _driver("device-health", "a node with two healthy GPUs"),
        _apply(
            "device-health",
            "2-policy.yaml",
            "A DeviceHealthPolicy: the driver's Unhealthy taint, held 5 s, becomes a NoExecute rule.",
        ),
        Step(
            "The policy is valid and may write DeviceTaintRules.",
            "kubectl wait --for=condition=Ready devicehealthpolicy/gpu-health --timeout=60s",
        ),
        _apply("device-health", "3-workloads.yaml", "A trainer on gpu-1 and a notebook on gpu-0."),
        _scheduled("demo-health"),
        Step(
            "The driver marks gpu-1 Unhealthy with a None taint in its ResourceSlice.",
            "python -m demo.fakedriver apply demo/device-health/4-gpu-1-unhealthy.yaml",
        ),
        Step(
            "5 s later the devicehealth operator taints it: the policy is Active.",
            "kubectl wait --for=condition=Active devicehealthpolicy/gpu-health --timeout=60s",
        ),
        Step(
            "One DeviceTaintRule, owned by the policy, for gpu-1 alone.",
            f"kubectl get {_HEALTH_RULES} -o custom-columns='"
            "DEVICE:.spec.deviceSelector.device,TAINT:.spec.taint.key,EFFECT:.spec.taint.effect,"
            "OWNER:.metadata.ownerReferences[0].name'",
        ),
        Step(
            "The devicetaint operator evicts the trainer: condition DisruptionTarget, then delete.",
            "kubectl wait --for=condition=DisruptionTarget pod/trainer -n demo-health --timeout=60s",
        ),
        Step(
            "Without a kubelet the evicted pod stays Terminating; the notebook on gpu-0 stays.",
            "kubectl get pods -n demo-health",
        ),
        Step(
            "The policy's columns: one device signalled, one tainted, none held back.",
            "kubectl get devicehealthpolicy gpu-health",
        ),
        Step(
            "The driver republishes gpu-1 healthy.",
            "python -m demo.fakedriver apply demo/device-health/5-gpu-1-repaired.yaml",
        ),
        Step(
            "10 s later (clearAfter) the operator deletes the rule, and gpu-1 takes claims again.",
            f"kubectl wait --for=delete {_HEALTH_RULES} --timeout=60s",
        ),
        Step(
            "The policy is idle again.",
            "kubectl get devicehealthpolicy gpu-health -o jsonpath="
            "'{range .status.conditions[*]}{.type}={.status} ({.reason}) {.message}{\"\\n\"}{end}'",
        ),
        Step(
            "The story in the policy's Events.",
            "kubectl get events -n default --field-selector involvedObject.name=gpu-health "
            "--sort-by=.metadata.creationTimestamp",
        ),
    ),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in (TEMPLATES, EVICTION, DRY_RUN, GPU_POOL, NIC_POOL, BINDING, DEVICE_HEALTH)
}
