"""The release's SBOM of the operator image the real node runs (built by ``make node-bin``): every
package of constraints.txt that the image installs is in it at its pinned version, and so are the
Debian packages the base is made of."""

from __future__ import annotations

from typing import Any

import pytest
from packaging.utils import canonicalize_name

from devcluster import images, sbom
from devcluster.constants import REPO_ROOT


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    built = images.ensure_operator()
    return sbom.image_bom(built.archive, {"dra-operators:image": f"{built.ref}@{built.digest}"})


def _components(document: dict[str, Any], purl_type: str) -> dict[str, str]:
    return {
        canonicalize_name(c["name"]) if purl_type == "pypi" else c["name"]: c["version"]
        for c in document["components"]
        if str(c.get("purl", "")).startswith(f"pkg:{purl_type}/")
    }


def test_every_constraint_the_image_installs_is_in_the_sbom_at_its_pin(document: dict[str, Any]) -> None:
    constraints = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            constraints[canonicalize_name(name)] = version
    locked = sbom.locked_pins(sbom.IMAGE_LOCK.read_text())
    installed = _components(document, "pypi")
    in_image = {name: version for name, version in constraints.items() if name in locked}
    assert {"kopf", "aiohttp", "pydantic", "cryptography"} <= set(in_image)
    for name, version in in_image.items():
        assert installed.get(name) == version, f"{name}=={version} pinned, the SBOM has {installed.get(name)}"
    # The build backend and the installer are locked outside constraints.txt, and are there too.
    assert installed["setuptools"] == locked["setuptools"]
    assert installed["pip"] == locked["pip"]


def test_the_sbom_lists_the_debian_packages_of_the_base(document: dict[str, Any]) -> None:
    debian = _components(document, "deb")
    assert set(images.BASE_PACKAGES) <= set(debian)
    assert debian["python3"]
    assert sbom.schema_errors(document) is None
