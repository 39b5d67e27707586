"""``make release-artifacts``: what a release publishes, built on this machine into ``dist/``.

- ``dra-operators-<version>.oci.tar``: the operator image (this machine's architecture), the
  same build as the real node's, named ``dra-operators:<version>``;
- ``dra-operators-<version>.cdx.json``: its SBOM (CycloneDX; ``devcluster/sbom.py``): the image's
  Python environment and Debian packages, with the image's and its base's manifest digests;
- ``dra-operators-<version>.tgz``: the packaged chart;
- ``SHA256SUMS`` of the three.

With a registry (the devcluster's, ``registry.Registry``) the image and the chart are pushed to
it as well: the image with skopeo, which reports the digest the manifests and the chart pin, and
the chart with ``helm push`` as an OCI artifact. RELEASE.md says how the same steps publish to
the project's registry.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
import tempfile
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


def _retagged(archive: Path, ref: str, target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="dra-release-") as tmp:
        layout = Path(tmp)
        with tarfile.open(archive) as tar:
            tar.extractall(layout, filter="data")
        images.name_layout(layout, ref)
        images.pack_layout(layout, target)


@dataclass(frozen=True)
class Published:
    """Where a registry serves what ``publish`` pushed."""

    version: str
    repository: str  # <registry>/dra-operators
    digest: str  # the image's manifest (or index) digest
    chart: str  # oci://<registry>/charts/dra-operators
    chart_digest: str

    @property
    def image(self) -> str:
        """The image pinned by digest, as manifests and the chart name it."""
        return f"{self.repository}@{self.digest}"


def publish(hub: registry.Registry, image: Path, chart: Path, say: images.Say = print) -> Published:
    """Push ``image`` (an OCI archive) and ``chart`` (the packaged chart) to ``hub``."""
    version = project_version()
    digest = registry.push_image(hub, f"oci-archive:{image}", version)
    say(f"pushed {hub.image()}:{version} ({digest})")
    helm = build.build_helm(log=say).directory / "helm"
    chart_digest = registry.push_chart(hub, helm, chart)
    chart_url = f"{hub.chart_url()}/{CHART.name}"
    say(f"pushed {chart_url}:{version} ({chart_digest})")
    return Published(version, hub.image(), digest, chart_url, chart_digest)


def artifacts(out: Path = DIST, say: images.Say = print) -> list[Path]:
    version = project_version()
    out.mkdir(parents=True, exist_ok=True)
    image = out / f"dra-operators-{version}.oci.tar"
    built = images.ensure_operator(say)
    _retagged(built.archive, f"{images.OPERATOR_REPOSITORY}:{version}", image)
    base = images.ensure_base(say)
    # Retagging changes the index's annotations only: the manifest digest is the built one.
    image_properties = {
        "dra-operators:image": f"{images.OPERATOR_REPOSITORY}:{version}@{built.digest}",
        "dra-operators:base-image": f"{base.ref}@{base.digest}",
        "dra-operators:base-packages": ",".join(images.BASE_PACKAGES),
    }
    bom = out / f"dra-operators-{version}.cdx.json"
    bom.write_text(json.dumps(sbom.image_bom(image, image_properties), indent=2) + "\n")
    say(f"image {built.digest}, base image {base.ref}@{base.digest}")
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
    chart = out / f"dra-operators-{version}.tgz"
    made = [image, bom, chart]
    sums = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in made)
    (out / "SHA256SUMS").write_text(sums)
    for path in made:
        where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else shown(path)
        say(f"{where} ({path.stat().st_size // 1024} KiB)")
    return made
