"""``make release-artifacts``: what a release publishes, built on this machine into ``dist/``.

- ``dra-operators-<version>.oci.tar``: the operator image (this machine's architecture), the
  same build as the real node's, named ``dra-operators:<version>``;
- ``dra-operators-<version>.cdx.json``: its SBOM (CycloneDX; ``devcluster/sbom.py``): the image's
  Python environment and Debian packages, with the image's and its base's manifest digests;
- ``dra-operators-<version>.tgz``: the packaged chart;
- ``SHA256SUMS`` of the three.

RELEASE.md says how the multi-architecture image and the chart are published from these.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
import tempfile
import tomllib
from pathlib import Path

from . import build, images, sbom
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
        say(f"{path.relative_to(REPO_ROOT)} ({path.stat().st_size // 1024} KiB)")
    return made
