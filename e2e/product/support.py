"""What the product-level tests share.

- Pods on the real node (``test_realnode.py``, ``test_deployed.py``, ``test_managed.py``): the
  DeviceClass of the test driver's GPUs, a template, a pod that uses it, and reading back what the
  operators, the scheduler and the kubelet made of them.
- Installing the product as users do (``kubectl apply -k``, ``helm install oci://...``) onto a
  devcluster with the real node, from the node's registry with the image pinned by digest, and
  reading the operators' Deployments and Pods back: the deployed tier (``test_deployed.py``), the
  version pass (``test_versions.py``) and the managed profile (``test_managed.py``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from demo import cleanup
from demo.player import Player
from demo.scenarios import SCENARIOS
from devcluster import build, images, realnode, registry, release
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.poolstatus.support import PROJECT, request_body, wait_done
from e2e.product.scenarios import STORIES
from e2e.resourceclaim.support import (
    absent_template,
    all_recorded,
    assert_exactly_one_claim_each,
    claims_by_pod,
    placeholder_pods,
)
from e2e.support import ARTIFACTS, device_class_body
from operators import OPERATOR_NAMES

RESOURCE = "/apis/resource.k8s.io/v1"
DEVICE_CLASS = "real-node-gpu"


def template(api: Kube, namespace: str, name: str = "one-gpu", klass: str = DEVICE_CLASS) -> str:
    api.create(
        f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": klass}}]}}
            },
        },
    )
    return name


def pod_body(name: str, template_name: str, script: str, restart: str = "Always") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {realnode.REAL_NODE_LABEL: "true"},
            "tolerations": [{"key": realnode.REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 2,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
            "containers": [
                {
                    "name": "main",
                    "image": images.BASE_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def generated_claim(api: Kube, namespace: str, pod: str) -> dict[str, Any]:
    """The claim our operator generated for ``pod``, once the pod status names it."""

    def claim() -> dict[str, Any] | None:
        obj = api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        statuses = (obj or {}).get("status", {}).get("resourceClaimStatuses") or []
        names = [s.get("resourceClaimName") for s in statuses if s.get("resourceClaimName")]
        if not names:
            return None
        found: dict[str, Any] | None = api.get_or_none(
            f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{names[0]}"
        )
        return found

    found = wait_for(claim, 60, f"the generated claim of {pod}")
    assert found is not None
    return found


def allocated_device(api: Kube, namespace: str, claim: str) -> str:
    def device() -> str | None:
        obj = api.get_or_none(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{claim}")
        results = ((obj or {}).get("status", {}).get("allocation") or {}).get("devices", {}).get(
            "results"
        ) or []
        return str(results[0]["device"]) if results else None

    found = wait_for(device, 60, f"claim {claim} to be allocated")
    assert found is not None
    return found


def phase(api: Kube, namespace: str, pod: str) -> str | None:
    obj = api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{pod}")
    return None if obj is None else str(obj.get("status", {}).get("phase"))


def cdi_specs(node: realnode.NodeLayout) -> list[Path]:
    return sorted(node.cdi_dir.glob("*.json"))


def logs(cluster: harness.Cluster, namespace: str, pod: str) -> str:
    return cluster.kubectl("logs", "-n", namespace, pod).stdout


def create_noexecute_rule(api: Kube, name: str, device: str) -> None:
    """A DeviceTaintRule that taints one of the test driver's devices NoExecute."""
    api.create(
        f"{RESOURCE}/devicetaintrules",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": {
                "deviceSelector": {
                    "driver": realnode.DRIVER_NAME,
                    "pool": realnode.NODE_NAME,
                    "device": device,
                },
                "taint": {"key": "dra-operators.test/broken", "value": "true", "effect": "NoExecute"},
            },
        },
    )


def create_gpu_class(api: Kube) -> str:
    api.create(f"{RESOURCE}/deviceclasses", device_class_body(DEVICE_CLASS, realnode.DRIVER_NAME))
    return DEVICE_CLASS


def eviction_condition(rule: dict[str, Any] | None) -> dict[str, Any]:
    for condition in (rule or {}).get("status", {}).get("conditions") or []:
        if condition.get("type") == "EvictionInProgress":
            return dict(condition)
    return {}


NAMESPACE = "dra-operators"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
OPERATOR_PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"


@dataclass
class Installed:
    cluster: harness.Cluster
    api: Kube
    available_at: float
    measurements: dict[str, Any] = field(default_factory=dict)

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl(*args, **kwargs)

    def kubectl_dra(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl_dra(*args)

    @property
    def published(self) -> release.Published:
        return _published(self.cluster)


def _published(cluster: harness.Cluster) -> release.Published:
    assert cluster.published is not None, "nothing was published to this cluster's node registry"
    return cluster.published


def _node_registry(cluster: harness.Cluster) -> registry.Registry:
    assert cluster.state is not None
    hub = cluster.state.node_registry
    assert hub is not None, "the real node started no registry"
    return hub


def unavailable(api: Kube, operators: Sequence[str]) -> list[str]:
    """The operators whose Deployments are not Available yet (all of them until they exist)."""
    items = {d["metadata"]["name"]: d for d in api.list(DEPLOYMENTS)}
    waiting = []
    for name in operators:
        deployment = items.get(f"dra-operators-{name}")
        conditions = {
            c["type"]: c["status"] for c in (deployment or {}).get("status", {}).get("conditions", [])
        }
        status = (deployment or {}).get("status", {})
        if conditions.get("Available") != "True" or status.get("updatedReplicas") != status.get("replicas"):
            waiting.append(name)
    return waiting


def operator_pods(api: Kube, operators: Sequence[str]) -> dict[str, dict[str, Any]]:
    pods = {}
    for pod in api.list(OPERATOR_PODS):
        component = pod["metadata"].get("labels", {}).get("app.kubernetes.io/component")
        if component in operators and pod["metadata"].get("deletionTimestamp") is None:
            pods[component] = pod
    return pods


@contextlib.contextmanager
def install(
    cluster: harness.Cluster, apply: Callable[[], object], operators: Sequence[str], artifact: str
) -> Iterator[Installed]:
    """``apply()`` (``kubectl apply -k``, ``helm install``) and wait until the operators'
    Deployments are Available; the measurements gathered meanwhile go to
    ``test-artifacts/<artifact>``."""
    api = Kube(cluster.kubeconfig)
    here = Installed(cluster, api, 0.0)
    try:
        started = time.monotonic()
        apply()
        try:
            wait_for(
                lambda: not unavailable(api, operators),
                300,
                "every operator Deployment to become Available",
                interval=0.5,
            )
        except AssertionError:
            print(cluster.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout)
            for name in unavailable(api, operators):
                print(
                    cluster.kubectl(
                        "logs", "-n", NAMESPACE, f"deploy/dra-operators-{name}", "--tail=20", check=False
                    ).stdout
                )
            raise
        here.available_at = time.monotonic()
        here.measurements["apply_to_available_seconds"] = round(here.available_at - started, 1)
        yield here
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / artifact).write_text(json.dumps(here.measurements, indent=2) + "\n")
        print(f"{artifact} measurements: {json.dumps(here.measurements)}")
        api.close()


# The demo's driver, granted at install as a user grants theirs: the shipped manifests grant none.
DEMO_DRIVER = "gpu.fabric.example.com"


def registry_overlay(cluster: harness.Cluster, overlay: Path, by_digest: bool = True) -> Path:
    """A kustomization of ``overlay`` whose image is the one published to the cluster's node
    registry, as a user's overlay names the image in their registry: pinned by its digest, or
    (``by_digest=False``) under the tag ``overlay`` gives it. The directory to ``apply -k``."""
    published = _published(cluster)
    image = {"name": images.OPERATOR_REPOSITORY, "newName": published.repository}
    if by_digest:
        image["digest"] = published.digest
    directory = cluster.workdir / f"{overlay.name}-{'digest' if by_digest else 'tag'}"
    directory.mkdir(exist_ok=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # kustomize refuses absolute paths.
        "resources": [os.path.relpath(overlay, directory)],
        "images": [image],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return directory


def installed_from_kustomize(cluster: harness.Cluster, overlay: Path, artifact: str) -> Iterator[Installed]:
    """``kubectl apply -k`` of ``overlay`` with the image from the node's registry by digest
    (``registry_overlay``), every operator Available, and the demo's driver granted (a module
    fixture's body)."""
    pinned = registry_overlay(cluster, overlay)

    def apply() -> object:
        return cluster.kubectl("apply", "-k", str(pinned), timeout=180)

    with install(cluster, apply, OPERATOR_NAMES, artifact) as here:
        granted = here.kubectl_dra("grant-driver", DEMO_DRIVER)
        assert granted.returncode == 0, granted.stderr
        yield here


def helm_chart(
    cluster: harness.Cluster, verb: str, *settings: str, tag: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``helm <verb> dra-operators`` (install, upgrade) of the chart the cluster's node registry
    serves, as users install it: ``oci://``, the registry's CA, the image from the same registry
    pinned by its digest (or under ``tag``), and each of ``settings`` a ``--set``."""
    published = _published(cluster)
    helm = build.build_helm().directory / "helm"
    # The chart uses the tag only where the digest is empty.
    image = [f"image.tag={tag}", "image.digest="] if tag else [f"image.digest={published.digest}"]
    command = [str(helm), verb, "dra-operators", published.chart, "--version", published.version]
    command += ["--ca-file", str(_node_registry(cluster).ca_file), "--namespace", NAMESPACE]
    command += ["--kubeconfig", cluster.kubeconfig, "--wait=false"]
    for setting in (f"image.repository={published.repository}", *image, *settings):
        command += ["--set", setting]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=180)


def _repository(name: str) -> str:
    """An image name without its tag or digest."""
    name = name.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def operator_images(cluster: harness.Cluster) -> dict[str, str]:
    """The node's containerd images of the operator's repository, under any name."""
    state = cluster.state
    assert state is not None
    assert state.node_bin_dir is not None
    present = images.image_digests(Path(state.node_bin_dir) / "ctr", str(state.node_layout.containerd_socket))
    return {
        name: digest
        for name, digest in present.items()
        if _repository(name).endswith(f"/{images.OPERATOR_REPOSITORY}")
    }


def demo_player(installed: Installed) -> Iterator[Player]:
    """The demo's player against the installed cluster (a module fixture's body)."""
    played = Player(installed.cluster.kubectl_path, installed.cluster.kubeconfig)
    try:
        yield played
    finally:
        played.close()


def play_story(installed: Installed, player: Player, story: str) -> None:
    """The README's demo story as ``make demo`` plays it, its objects removed before and after."""
    scenario = SCENARIOS[story]
    cleanup.clean(installed.api, scenario)
    try:
        STORIES[story](installed.api, player, scenario)
    finally:
        cleanup.clean(installed.api, scenario, wait=False)


def gpu_class(installed: Installed) -> Iterator[str]:
    """The test driver's DeviceClass on the installed cluster (a fixture's body)."""
    yield create_gpu_class(installed.api)
    installed.api.delete(f"{RESOURCE}/deviceclasses/{DEVICE_CLASS}")


def template_pod_runs_and_its_claim_goes_with_it(installed: Installed, namespace: str) -> None:
    """A pod of a template runs on the real node with its prepared device, and its generated
    claim is deleted with it (the gpu class must exist)."""
    api = installed.api
    pods = f"/api/v1/namespaces/{namespace}/pods"
    api.create(
        pods, pod_body("trainer", template(api, namespace), 'echo "GPU_DEVICE_0=$GPU_DEVICE_0"; sleep 3600')
    )
    claim = generated_claim(api, namespace, "trainer")
    device = allocated_device(api, namespace, claim["metadata"]["name"])
    wait_for(lambda: phase(api, namespace, "trainer") == "Running", 120, "trainer to run on the real node")
    wait_for(
        lambda: f"GPU_DEVICE_0={device}" in logs(installed.cluster, namespace, "trainer"),
        30,
        "the container to print its prepared device",
    )
    api.delete(f"{pods}/trainer")
    claims = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    wait_for(lambda: api.list(claims) == [], 90, "the deployed operator to delete the generated claim")


def project_pool_status_completes(api: Kube, name: str) -> dict[str, Any]:
    """A request of the project CRD for the test driver: Complete, with the real node's one pool."""
    api.create(PROJECT.path(), request_body(PROJECT, name, realnode.DRIVER_NAME))
    try:
        request = wait_done(api, PROJECT, name, timeout=60)
        (condition,) = request["status"]["conditions"]
        assert (condition["type"], condition["status"]) == ("Complete", "True"), condition
        assert request["status"]["poolCount"] == 1
        return request
    finally:
        api.delete(PROJECT.path(name))


def unready_or_restarted(installed: Installed, operators: Sequence[str]) -> dict[str, str]:
    """Each operator whose pod is not Ready or restarted, with its pod's status and its logs (this
    run's and the previous one's)."""
    problems = {}
    for name, pod in operator_pods(installed.api, operators).items():
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"]
        restarts = sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", []))
        if ready != "True" or restarts:
            pod_name = pod["metadata"]["name"]
            now = installed.kubectl("logs", "-n", NAMESPACE, pod_name, "--tail=30", check=False).stdout
            before = installed.kubectl(
                "logs", "-n", NAMESPACE, pod_name, "--previous", "--tail=30", check=False
            ).stdout
            problems[name] = f"ready={ready} restarts={restarts}\n{pod['status']}\n{before}\n---\n{now}"
    return problems


# -- upgrades: a burst of template pods through each rollout ---------------------------------------


def rolled_out(api: Kube, image: str) -> bool:
    deployments = api.list(DEPLOYMENTS)
    return len(deployments) == len(OPERATOR_NAMES) and all(
        d["spec"]["template"]["spec"]["containers"][0]["image"] == image
        and d["status"].get("observedGeneration") == d["metadata"]["generation"]
        and d["status"].get("updatedReplicas")
        == d["status"].get("replicas")
        == d["status"].get("availableReplicas")
        for d in deployments
    )


ROLLOUT_BURST = 500
ROLL_AFTER = 100


# e2e/deployed-next's tag.
NEXT_TAG = "next"


def tag_next(installed: Installed) -> str:
    """The published image pushed again under the tag ``next``, so that an install can move
    between the digest and that tag (each move a rollout of every Deployment); the image by that
    tag. The same manifest: a rollout needs another reference, not another image."""
    published = installed.published
    archive = images.ensure_operator().archive
    digest = registry.push_image(_node_registry(installed.cluster), f"oci-archive:{archive}", NEXT_TAG)
    assert digest == published.digest, f"{NEXT_TAG} is {digest}, the published image {published.digest}"
    return f"{published.repository}:{NEXT_TAG}"


def bursts_through_rollouts(
    installed: Installed,
    namespace: str,
    rolls: Sequence[tuple[str, Callable[[], object]]],
    burst: int = ROLLOUT_BURST,
) -> list[float]:
    """For each ``(image, roll)``: a burst of ``burst`` template pods, ``roll()`` after the first 100,
    and the rest created while the Deployments roll (all at once if they are done first). Then
    every pod so far must end with exactly one claim. Returns each rollout's seconds."""
    api = installed.api
    absent_template(api, namespace)
    everyone: list[str] = []
    seconds = []
    for round_, (image, roll) in enumerate(rolls):
        names = [f"r{round_}-{i}" for i in range(burst)]
        placeholder_pods(api, namespace, names[:ROLL_AFTER])
        started = time.monotonic()
        roll()
        done_at = None
        for index, name in enumerate(names[ROLL_AFTER:]):
            if done_at is None and index % 25 == 0 and rolled_out(api, image):
                done_at = time.monotonic()
            placeholder_pods(api, namespace, [name])
        wait_for(functools.partial(rolled_out, api, image), 300, f"every Deployment to roll out {image}")
        seconds.append(round((done_at or time.monotonic()) - started, 1))
        everyone += names
        wait_for(
            functools.partial(all_recorded, api, namespace, len(everyone)),
            300,
            f"the claims of {len(everyone)} pods",
        )
        # A claim a hand-over raced into existence beside the recorded one is deleted by the
        # claim sync; what counts is that every pod ends with exactly one.
        raced = sorted(p for p, c in claims_by_pod(api, namespace).items() if len(c) > 1)
        installed.measurements.setdefault("duplicates_seen_before_repair", []).append(raced)
        wait_for(
            lambda: all(len(c) == 1 for c in claims_by_pod(api, namespace).values()), 120, "one claim per pod"
        )
        assert_exactly_one_claim_each(api, namespace, everyone)
    return seconds
