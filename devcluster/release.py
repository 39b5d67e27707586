"""``make release-artifacts``: what a release publishes, built on this machine into ``dist/``.

- ``dra-operators-<version>.oci.tar``: the operator image (this machine's architecture), the
  same build as the real node's, named ``dra-operators:<version>``;
- ``dra-operators-<version>.tgz``: the packaged chart;
- ``SHA256SUMS`` of both.

RELEASE.md says how the multi-architecture image and the chart are published from these.
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
import tempfile
import tomllib
from pathlib import Path

from . import build, images
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
    _retagged(images.operator_image(say), f"{images.OPERATOR_REPOSITORY}:{version}", image)
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
    made = [image, chart]
    sums = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in made)
    (out / "SHA256SUMS").write_text(sums)
    for path in made:
        say(f"{path.relative_to(REPO_ROOT)} ({path.stat().st_size // 1024} KiB)")
    return made
