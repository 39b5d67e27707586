"""requirements/image.txt, the operator image's hash-locked dependencies, agrees with
constraints.txt, and the SBOM's parts read what the image holds."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from devcluster import sbom

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "image.txt"
BUILD_TOOLS = ROOT / "requirements" / "image.in"


def _constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _build_tools() -> dict[str, str]:
    return sbom.locked_pins(BUILD_TOOLS.read_text())


def test_the_lock_pins_what_constraints_txt_pins() -> None:
    constraints, tools = _constraints(), _build_tools()
    locked = sbom.locked_pins(LOCK.read_text())
    assert set(tools) == {"pip", "setuptools"}
    for name, version in locked.items():
        expected = tools.get(name) or constraints.get(name)
        assert expected is not None, f"{name} is locked but pinned nowhere: run make image-lock"
        assert version == expected, f"{name}=={version} locked, {expected} pinned: run make image-lock"
    for name, version in tools.items():
        assert locked.get(name) == version, f"{name}=={version} of image.in is not locked: make image-lock"


def test_the_lock_holds_every_runtime_dependency_and_the_build_backend() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    locked = sbom.locked_pins(LOCK.read_text())
    for line in project["project"]["dependencies"]:
        name = canonicalize_name(Requirement(line).name)
        assert name in locked, f"{name} is a dependency but not in {LOCK.name}: run make image-lock"
    for line in project["build-system"]["requires"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert requirement.specifier.contains(locked[name]), f"{LOCK.name} locks {name}=={locked[name]}"


def test_every_locked_package_carries_a_hash() -> None:
    blocks: dict[str, list[str]] = {}
    current = ""
    for line in LOCK.read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            current = line.split("==")[0]
            blocks[current] = []
        elif line.strip().startswith("--hash=sha256:") and current:
            blocks[current].append(line)
    assert len(blocks) == len(sbom.locked_pins(LOCK.read_text()))
    assert all(blocks.values()), [name for name, hashes in blocks.items() if not hashes]


def test_the_dockerfile_installs_the_lock_by_hash_and_the_project_without_fetching() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --no-cache-dir --require-hashes --no-deps -r image.txt" in dockerfile
    assert "--no-deps --no-build-isolation --no-index ." in dockerfile
    assert "-c constraints.txt" not in dockerfile


STATUS = """\
Package: tini
Status: install ok installed
Architecture: amd64
Version: 0.19.0-1+b3
Description: tiny but valid init for containers
 Tini is the simplest init you could think of.

Package: libssl3
Status: install ok installed
Architecture: amd64
Source: openssl (3.0.17-1~deb12u2)
Version: 3.0.17-1~deb12u2

Package: gone
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
"""


def test_dpkg_status_gives_the_installed_packages_only() -> None:
    packages = sbom.installed_debian_packages(STATUS)
    assert packages == [
        sbom.DebianPackage("libssl3", "3.0.17-1~deb12u2", "amd64", "openssl"),
        sbom.DebianPackage("tini", "0.19.0-1+b3", "amd64", "tini"),
    ]
    component = sbom.debian_component(packages[1], "debian-12")
    assert component["purl"] == "pkg:deb/debian/tini@0.19.0-1%2Bb3?arch=amd64&distro=debian-12"
    assert "properties" not in component
    assert sbom.debian_component(packages[0], "debian-12")["properties"] == [
        {"name": "debian:source", "value": "openssl"}
    ]


def test_the_merged_document_is_valid_cyclonedx_and_names_what_is_missing() -> None:
    python = {
        "bomFormat": "CycloneDX",
        "specVersion": sbom.SPEC_VERSION,
        "version": 1,
        "components": [
            {
                "type": "library",
                "bom-ref": "a",
                "name": "PyYAML",
                "version": "6.0.4",
                "purl": "pkg:pypi/pyyaml@6.0.4",
            }
        ],
    }
    release = sbom.os_release('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n')
    document = sbom.merged(
        python, sbom.installed_debian_packages(STATUS), release, {"dra-operators:image": "x@sha256:1"}
    )
    assert sbom.schema_errors(document) is None
    kinds = [(c["type"], c["name"]) for c in document["components"]]
    assert kinds == [
        ("library", "PyYAML"),
        ("operating-system", "debian"),
        ("library", "libssl3"),
        ("library", "tini"),
    ]
    assert {"name": "dra-operators:image", "value": "x@sha256:1"} in document["metadata"]["properties"]
    assert sbom.missing_pins(document, {"pyyaml": "6.0.4"}) == []
    assert sbom.missing_pins(document, {"pyyaml": "6.0.3", "kopf": "1.45.2"}) == [
        "kopf==1.45.2",
        "pyyaml==6.0.3",
    ]
    broken = json.loads(json.dumps(document))
    broken["components"][0]["type"] = "gadget"
    assert sbom.schema_errors(broken)
