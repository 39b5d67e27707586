"""The product from a registry, as users get it. ``make release-artifacts``'s steps push the
operator image and the chart to the real node's registry (Debian's docker-registry, TLS from the
devcluster's CA, which the node's containerd trusts through its hosts.toml), and attach the SBOM
to the image index as an OCI artifact (the referrers tag schema: distribution 2.8 has no
referrers API); the chart is
installed with ``helm install oci://...`` and the manifests with kustomize, both pinning the image
by digest, and the kubelet pulls it. Nothing is imported: the node's containerd has no operator
image until it pulls one. The image is one index for linux/amd64 and linux/arm64 (the arm64 one
built under qemu-user-static), and this amd64 node fetches its own manifest only.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import build, images, registry, release
from devcluster.constants import REPO_ROOT
from devcluster.kube import wait_for
from e2e import harness
from e2e.product.support import NAMESPACE, OPERATOR_PODS, Installed, install, operator_images, operator_pods
from operators import OPERATOR_NAMES

pytestmark = [pytest.mark.devcluster_only, pytest.mark.kube_proxy, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def hub(registry_cluster: harness.Cluster) -> registry.Registry:
    assert registry_cluster.state is not None
    found: registry.Registry | None = registry_cluster.state.node_registry
    assert found is not None, "the real node started no registry"
    return found


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """``make release-artifacts``' files: the image index's archive, its SBOM, the chart."""
    return release.artifacts(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def published(hub: registry.Registry, released: list[Path]) -> release.Published:
    """What ``make release-artifacts`` does with a devcluster running: build, then push."""
    image, bom, chart = released
    return release.publish(hub, image, chart, bom)


def _ctr(cluster: harness.Cluster, *args: str) -> str:
    state = cluster.state
    assert state is not None
    assert state.node_bin_dir is not None
    return subprocess.run(
        [
            f"{state.node_bin_dir}/ctr",
            f"--address={state.node_layout.containerd_socket}",
            "--namespace=k8s.io",
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout


def _pulled_from_the_registry(
    installed: Installed, hub: registry.Registry, published: release.Published
) -> None:
    """Every operator pod runs the image by digest, from the registry: the kubelet's Pulled event
    for a current pod, the container's imageID, containerd's image of that name and digest, and
    in its content store the manifest of this node's architecture and not the other's."""
    pods = operator_pods(installed.api, OPERATOR_NAMES)
    assert sorted(pods) == sorted(OPERATOR_NAMES)
    for name, pod in pods.items():
        assert pod["spec"]["containers"][0]["image"] == published.image, name
        assert pod["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent", name
        status = pod["status"]["containerStatuses"][0]
        assert status["imageID"] == published.image, f"{name}: {status}"
    events = installed.api.list(f"/api/v1/namespaces/{NAMESPACE}/events")
    current = {pod["metadata"]["name"] for pod in pods.values()}
    pulls = [
        e["message"]
        for e in events
        if e.get("reason") == "Pulled" and e["involvedObject"].get("name") in current
    ]
    assert any(m.startswith(f'Successfully pulled image "{published.image}"') for m in pulls), pulls
    installed.measurements["pulled"] = sorted(set(pulls))
    assert operator_images(installed.cluster) == {published.image: published.digest}
    platforms = hub.platforms(images.OPERATOR_REPOSITORY, published.digest)
    content = _content(installed.cluster)
    assert platforms["linux/amd64"] in content
    assert platforms["linux/arm64"] not in content
    installed.measurements["platforms"] = platforms


def _content(cluster: harness.Cluster) -> set[str]:
    """The digests of every blob in the node's containerd content store."""
    return set(_ctr(cluster, "content", "ls", "--quiet").split())


@contextlib.contextmanager
def _installed(cluster: harness.Cluster, apply: Callable[[], object], artifact: str) -> Iterator[Installed]:
    assert operator_images(cluster) == {}, "the node has an operator image before the install"
    with install(cluster, apply, OPERATOR_NAMES, artifact) as here:
        yield here


def _gone(installed: Installed) -> None:
    """No operator pod left and no operator image in containerd, so the next install pulls."""
    wait_for(lambda: not installed.api.list(OPERATOR_PODS), 120, "the operator pods gone")
    for name in operator_images(installed.cluster):
        _ctr(installed.cluster, "images", "rm", "--sync", name)


def test_the_image_index_lists_both_architectures(
    hub: registry.Registry, published: release.Published
) -> None:
    """One index for linux/amd64 and linux/arm64, under the release's tag and the digest the
    installs pin."""
    assert sorted(hub.platforms(images.OPERATOR_REPOSITORY, published.version)) == [
        "linux/amd64",
        "linux/arm64",
    ]
    _, headers = hub.get(
        f"{images.OPERATOR_REPOSITORY}/manifests/{published.version}", registry.INDEX_MEDIA_TYPES
    )
    assert headers["Docker-Content-Digest"] == published.digest


def test_the_sbom_is_attached_to_the_image_index(
    hub: registry.Registry, published: release.Published, released: list[Path]
) -> None:
    """The SBOM is an OCI artifact beside the image: a referrer of the index digest (under the
    tag schema's tag, as on any registry without the referrers API) of CycloneDX's artifact type,
    whose blob is dist's file byte for byte and names the index it is attached to."""
    repository = images.OPERATOR_REPOSITORY
    tags, _ = hub.get(f"{repository}/tags/list")
    assert sorted(tags["tags"]) == sorted([published.version, registry.referrers_tag(published.digest)])
    assert hub.referrers(repository, published.digest) == {registry.SBOM_ARTIFACT_TYPE: published.sbom_digest}
    manifest, headers = hub.get(f"{repository}/manifests/{published.sbom_digest}", (registry.OCI_MANIFEST,))
    assert headers["Docker-Content-Digest"] == published.sbom_digest
    assert manifest["artifactType"] == registry.SBOM_ARTIFACT_TYPE
    assert (manifest["subject"]["mediaType"], manifest["subject"]["digest"]) == (
        registry.OCI_INDEX,
        published.digest,
    )
    _, bom, _ = released
    (layer,) = manifest["layers"]
    assert layer["annotations"]["org.opencontainers.image.title"] == bom.name
    served = hub.sbom(repository, published.digest)
    assert served == bom.read_bytes()
    document = json.loads(served)
    assert "kopf" in {component["name"] for component in document["components"]}
    properties = {p["name"]: p["value"] for p in document["metadata"]["properties"]}
    assert properties["dra-operators:image-index"] == f"{repository}:{published.version}@{published.digest}"
    # Attached to the index, not to an architecture's manifest, which has no referrers tag.
    amd64 = hub.platforms(repository, published.digest)["linux/amd64"]
    assert hub.referrers(repository, amd64) == {}
    # Published again, the release keeps its one SBOM artifact.
    oras = build.build_oras().directory / "oras"
    assert registry.attach_sbom(hub, oras, published.digest, bom) == published.sbom_digest
    tag = registry.referrers_tag(published.digest)
    index, _ = hub.get(f"{repository}/manifests/{tag}", (registry.OCI_INDEX,))
    assert [entry["digest"] for entry in index["manifests"]] == [published.sbom_digest]


def test_helm_installs_the_chart_from_the_registry_and_the_node_pulls_the_image(
    registry_cluster: harness.Cluster, hub: registry.Registry, published: release.Published
) -> None:
    # The registry's own API: the chart is an OCI artifact of Helm's media type, under its version.
    chart_manifest, headers = hub.get(
        f"{registry.CHART_REPOSITORY}/dra-operators/manifests/{published.version}",
        registry.MANIFEST_MEDIA_TYPES,
    )
    assert headers["Docker-Content-Digest"] == published.chart_digest
    assert chart_manifest["config"]["mediaType"] == "application/vnd.cncf.helm.config.v1+json"
    helm = str(build.build_helm().directory / "helm")
    registry_cluster.kubectl("apply", "-f", str(REPO_ROOT / "manifests" / "namespace" / "namespace.yaml"))

    def helm_install() -> object:
        return subprocess.run(
            [
                helm,
                "install",
                "dra-operators",
                published.chart,
                "--version",
                published.version,
                "--ca-file",
                str(hub.ca_file),
                "--namespace",
                NAMESPACE,
                "--kubeconfig",
                registry_cluster.kubeconfig,
                "--set",
                f"image.repository={published.repository}",
                "--set",
                f"image.digest={published.digest}",
                "--wait=false",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=180,
        )

    with _installed(registry_cluster, helm_install, "registry-helm.json") as installed:
        _pulled_from_the_registry(installed, hub, published)
        releases = subprocess.run(
            [helm, "list", "-n", NAMESPACE, "--kubeconfig", registry_cluster.kubeconfig, "-o", "json"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert [(r["chart"], r["status"]) for r in json.loads(releases)] == [
            (f"dra-operators-{published.version}", "deployed")
        ]
        subprocess.run(
            [
                helm,
                "uninstall",
                "dra-operators",
                "-n",
                NAMESPACE,
                "--kubeconfig",
                registry_cluster.kubeconfig,
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        _gone(installed)


def test_kustomize_pins_the_image_by_digest_and_the_node_pulls_it(
    registry_cluster: harness.Cluster, hub: registry.Registry, published: release.Published, tmp_path: Path
) -> None:
    # A user's kustomization: the shipped manifests, the image from their registry by digest.
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # kustomize refuses absolute paths.
        "resources": [os.path.relpath(REPO_ROOT / "manifests", tmp_path)],
        "images": [
            {"name": images.OPERATOR_REPOSITORY, "newName": published.repository, "digest": published.digest}
        ],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    rendered = registry_cluster.kubectl("kustomize", str(tmp_path)).stdout
    deployments: list[dict[str, Any]] = [
        d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"
    ]
    assert {d["spec"]["template"]["spec"]["containers"][0]["image"] for d in deployments} == {published.image}

    def apply() -> object:
        return registry_cluster.kubectl("apply", "-k", str(tmp_path), timeout=180)

    with _installed(registry_cluster, apply, "registry-kustomize.json") as installed:
        _pulled_from_the_registry(installed, hub, published)
