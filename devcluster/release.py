"""``make release-artifacts``: what a release publishes, built on this machine into ``dist/``.

- ``dra-operators-<version>.oci.tar``: the operator image for every architecture of
  ``images.RELEASE_ARCHITECTURES`` (the same build as the real node's; another architecture's
  under qemu-user-static) as one image index named ``dra-operators:<version>``;
- ``dra-operators-<version>.cdx.json``: the SBOM of this machine's architecture's image
  (CycloneDX; ``devcluster/sbom.py``): its Python environment and Debian packages, with the
  image's, the index's and the base's digests;
- ``dra-operators-<version>.tgz``: the packaged chart;
- ``SHA256SUMS`` of the three.

With a registry (the devcluster's, ``registry.Registry``) the image and the chart are pushed to
it as well: the image with skopeo, which reports the digest the manifests and the chart pin, the
SBOM with ``oras attach`` as an OCI artifact whose ``subject`` is that image index, and the chart
with ``helm push`` as an OCI artifact. RELEASE.md says how the same steps publish to the
project's registry.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import build, images, registry, sbom
from .build import shown
from .constants import REPO_ROOT

DIST = REPO_ROOT / "dist"
CHART = REPO_ROOT / "charts" / "dra-operators"


def project_version() -> str:
    return str(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"])


@dataclass(frozen=True)
class Published:
    """Where a registry serves what ``publish`` pushed."""

    version: str
    repository: str  # <registry>/dra-operators
    digest: str  # the image's manifest (or index) digest
    chart: str  # oci://<registry>/charts/dra-operators
    chart_digest: str
    sbom_digest: str | None = None  # the SBOM artifact's manifest, whose subject is ``digest``

    @property
    def image(self) -> str:
        """The image pinned by digest, as manifests and the chart name it."""
        return f"{self.repository}@{self.digest}"


def publish(
    hub: registry.Registry, image: Path, chart: Path, bom: Path | None = None, say: images.Say = print
) -> Published:
    """Push ``image`` (an OCI archive of an image or image index), ``chart`` (the packaged chart)
    and, for a release, ``bom`` (the image's SBOM, attached to the pushed image) to ``hub``."""
    version = project_version()
    digest = registry.push_image(hub, f"oci-archive:{image}", version)
    say(f"pushed {hub.image()}:{version} ({digest})")
    sbom_digest = None
    if bom is not None:
        oras = build.build_oras(log=say).directory / "oras"
        sbom_digest = registry.attach_sbom(hub, oras, digest, bom)
        say(f"attached {bom.name} to {hub.image()}@{digest} ({sbom_digest})")
    helm = build.build_helm(log=say).directory / "helm"
    chart_digest = registry.push_chart(hub, helm, chart)
    chart_url = f"{hub.chart_url()}/{CHART.name}"
    say(f"pushed {chart_url}:{version} ({chart_digest})")
    return Published(version, hub.image(), digest, chart_url, chart_digest, sbom_digest)


def artifacts(out: Path = DIST, say: images.Say = print) -> list[Path]:
    version = project_version()
    out.mkdir(parents=True, exist_ok=True)
    image = out / f"dra-operators-{version}.oci.tar"
    per_arch = {arch: images.ensure_operator(say, arch) for arch in images.RELEASE_ARCHITECTURES}
    index = images.index_archive(
        {arch: built.archive for arch, built in per_arch.items()},
        f"{images.OPERATOR_REPOSITORY}:{version}",
        image,
    )
    # The SBOM is of this machine's image: the same packages at the same pins as the other
    # architecture's, which differ in their binaries only.
    built = images.ensure_operator(say)
    base = images.ensure_base(say)
    image_properties = {
        "dra-operators:image": f"{images.OPERATOR_REPOSITORY}:{version}@{built.digest}",
        "dra-operators:image-index": f"{images.OPERATOR_REPOSITORY}:{version}@{index}",
        "dra-operators:base-image": f"{base.ref}@{base.digest}",
        "dra-operators:base-packages": ",".join(images.BASE_PACKAGES),
    }
    bom = out / f"dra-operators-{version}.cdx.json"
    bom.write_text(json.dumps(sbom.image_bom(built.archive, image_properties), indent=2) + "\n")
    say(f"image index {index}, image {built.digest}, base image {base.ref}@{base.digest}")
    chart = package_chart(out, say)
    made = [image, bom, chart]
    sums = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in made)
    (out / "SHA256SUMS").write_text(sums)
    for path in made:
        where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else shown(path)
        say(f"{where} ({path.stat().st_size // 1024} KiB)")
    return made


def package_chart(out: Path, say: images.Say = print) -> Path:
    """``helm package`` of the chart into ``out``, its version and appVersion the project's; the
    package's path."""
    version = project_version()
    helm = build.build_helm(log=say).directory / "helm"
    subprocess.run(
        [
            str(helm),
            "package",
            str(CHART),
            "--destination",
            str(out),
            "--version",
            version,
            "--app-version",
            version,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out / f"{CHART.name}-{version}.tgz"
