"""The operator image's SBOM: one CycloneDX JSON document of what the image holds.

- the Python environment (``/opt/dra-operators``): ``cyclonedx-py environment`` over the
  distributions' metadata (``*.dist-info``) read out of the image's layers, never a guess from
  the requirements: a package the lock misses, or one a RUN step added, shows as it is installed;
- the Debian packages: dpkg's status database of the image (``var/lib/dpkg/status``), each an
  installed package with its ``pkg:deb/debian/...`` package URL, and the Debian release itself as
  the operating-system component.

The document is checked against CycloneDX's schema (the library's strict validator) and against
``requirements/image.txt``: every package the image is made to install must be in it at its
pinned version, or the release stops.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from packageurl import PackageURL
from packaging.utils import canonicalize_name

from .constants import REPO_ROOT

IMAGE_LOCK = REPO_ROOT / "requirements" / "image.txt"
# The image's virtual environment (the Dockerfile's `python3 -m venv`).
IMAGE_VENV = PurePosixPath("opt/dra-operators")
SPEC_VERSION = "1.6"

_DPKG_STATUS = "var/lib/dpkg/status"
_OS_RELEASE = "usr/lib/os-release"
_DIST_INFO = re.compile(rf"^{re.escape(str(IMAGE_VENV))}/lib/python3\.\d+/site-packages/[^/]+\.dist-info/")
_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"
_LOCK_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


class SbomError(Exception):
    """The SBOM cannot be made, or does not hold what the image is made of."""


# -- the pure parts -------------------------------------------------------------------------


def locked_pins(lock_text: str) -> dict[str, str]:
    """``requirements/image.txt``'s ``name==version`` lines, by canonical name."""
    pins: dict[str, str] = {}
    for line in lock_text.splitlines():
        match = _LOCK_PIN.match(line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


@dataclass(frozen=True)
class DebianPackage:
    name: str
    version: str
    architecture: str
    source: str


def _paragraphs(text: str) -> Iterator[dict[str, str]]:
    fields: dict[str, str] = {}
    last = ""
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if fields:
                yield fields
            fields, last = {}, ""
        elif line[0] in " \t":
            if last:
                fields[last] += "\n" + line.strip()
        else:
            key, _, value = line.partition(":")
            last = key.strip()
            fields[last] = value.strip()


def installed_debian_packages(status_text: str) -> list[DebianPackage]:
    """The packages dpkg's status database records as installed (not removed or half-configured
    ones), sorted by name."""
    packages = []
    for fields in _paragraphs(status_text):
        if fields.get("Status", "").split()[-1:] != ["installed"]:
            continue
        name = fields["Package"]
        # Source: "name (version)" when the binary's version differs from the source's.
        source = fields.get("Source", name).split()[0]
        packages.append(DebianPackage(name, fields["Version"], fields.get("Architecture", "all"), source))
    return sorted(packages, key=lambda package: package.name)


def os_release(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            values[key.strip()] = value.strip().strip('"')
    return values


def debian_component(package: DebianPackage, distro: str) -> dict[str, Any]:
    purl = PackageURL(
        type="deb",
        namespace="debian",
        name=package.name,
        version=package.version,
        qualifiers={"arch": package.architecture, "distro": distro},
    ).to_string()
    component: dict[str, Any] = {
        "type": "library",
        "bom-ref": purl,
        "name": package.name,
        "version": package.version,
        "purl": purl,
    }
    if package.source != package.name:
        component["properties"] = [{"name": "debian:source", "value": package.source}]
    return component


def merged(
    python_bom: dict[str, Any],
    debian: list[DebianPackage],
    release: dict[str, str],
    image_properties: dict[str, str],
) -> dict[str, Any]:
    """The Python environment's document with the Debian packages, the operating system, and
    the image's digests (``image_properties``) added."""
    document: dict[str, Any] = json.loads(json.dumps(python_bom))
    distro = f"{release.get('ID', 'debian')}-{release.get('VERSION_ID', '')}".rstrip("-")
    operating_system = {
        "type": "operating-system",
        "bom-ref": f"os:{distro}",
        "name": release.get("ID", "debian"),
        "version": release.get("VERSION_ID", ""),
        "description": release.get("PRETTY_NAME", ""),
    }
    document.setdefault("components", [])
    document["components"] += [operating_system, *(debian_component(p, distro) for p in debian)]
    metadata = document.setdefault("metadata", {})
    metadata.setdefault("properties", [])
    metadata["properties"] += [
        {"name": name, "value": value} for name, value in sorted(image_properties.items())
    ]
    return document


def missing_pins(document: dict[str, Any], pins: dict[str, str]) -> list[str]:
    """The ``name==version`` of ``pins`` that no PyPI component of ``document`` is."""
    present = {
        (canonicalize_name(str(c.get("name", ""))), str(c.get("version", "")))
        for c in document.get("components", [])
        if str(c.get("purl", "")).startswith("pkg:pypi/")
    }
    return sorted(f"{name}=={version}" for name, version in pins.items() if (name, version) not in present)


def schema_errors(document: dict[str, Any]) -> str | None:
    """CycloneDX's JSON schema, strictly: None, or what is wrong."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.from_version(SPEC_VERSION)).validate_str(json.dumps(document))
    return None if error is None else str(error)


# -- reading the image ----------------------------------------------------------------------


def _layers(layout: Callable[[str], IO[bytes]]) -> list[str]:
    index = json.load(layout("index.json"))
    manifest = json.load(layout(_blob_name(index["manifests"][0]["digest"])))
    return [_blob_name(layer["digest"]) for layer in manifest["layers"]]


def _blob_name(digest: str) -> str:
    return "blobs/sha256/" + digest.removeprefix("sha256:")


def _wanted(name: str) -> bool:
    return name in (_DPKG_STATUS, _OS_RELEASE) or bool(_DIST_INFO.match(name))


def extract_image_files(archive: Path, destination: Path) -> None:
    """dpkg's status, os-release and the venv's ``*.dist-info`` of the image in ``archive`` (an
    OCI archive), as the image's filesystem has them: layers applied in order, whiteouts too."""
    with tarfile.open(archive) as outer:

        def member(name: str) -> IO[bytes]:
            handle = outer.extractfile(name)
            if handle is None:
                raise SbomError(f"{archive} has no {name}")
            return handle

        for layer in _layers(member):
            with gzip.open(member(layer)) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
                for entry in tar:
                    name = entry.name.removeprefix("./")
                    base = PurePosixPath(name)
                    if base.name == _OPAQUE:
                        shutil.rmtree(destination / base.parent, ignore_errors=True)
                    elif base.name.startswith(_WHITEOUT):
                        gone = destination / base.parent / base.name.removeprefix(_WHITEOUT)
                        if gone.is_dir():
                            shutil.rmtree(gone)
                        else:
                            gone.unlink(missing_ok=True)
                    elif entry.isreg() and _wanted(name):
                        target = destination / name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        source = tar.extractfile(entry)
                        if source is not None:
                            with open(target, "wb") as out:
                                shutil.copyfileobj(source, out)


def python_environment_bom(site_packages: Path, pyproject: Path, workdir: Path) -> dict[str, Any]:
    """``cyclonedx-py environment`` of the distributions in ``site_packages``: a virtual
    environment of this interpreter whose site-packages holds them (their metadata is all
    cyclonedx-py reads; no code of theirs runs)."""
    env = workdir / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    (target,) = (env / "lib").glob("python3.*/site-packages")
    shutil.rmtree(target)
    shutil.copytree(site_packages, target)
    out = workdir / "python.cdx.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cyclonedx_py",
            "environment",
            "--spec-version",
            SPEC_VERSION,
            "--output-format",
            "JSON",
            "--output-reproducible",
            "--pyproject",
            str(pyproject),
            "--output-file",
            str(out),
            str(env),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    if done.returncode != 0:
        raise SbomError(f"cyclonedx-py environment failed ({done.returncode}):\n{done.stderr[-3000:]}")
    loaded: dict[str, Any] = json.loads(out.read_text())
    return loaded


def image_bom(
    archive: Path,
    image_properties: dict[str, str],
    pyproject: Path = REPO_ROOT / "pyproject.toml",
    lock: Path = IMAGE_LOCK,
) -> dict[str, Any]:
    """The checked SBOM of the image in ``archive`` (an OCI archive of the operator image)."""
    with tempfile.TemporaryDirectory(prefix="dra-sbom-") as tmp:
        work = Path(tmp)
        rootfs = work / "rootfs"
        extract_image_files(archive, rootfs)
        status = rootfs / _DPKG_STATUS
        site = sorted((rootfs / IMAGE_VENV / "lib").glob("python3.*/site-packages"))
        if not status.is_file() or len(site) != 1:
            raise SbomError(f"{archive} has no dpkg status or no one {IMAGE_VENV} site-packages")
        python = python_environment_bom(site[0], pyproject, work)
        release = os_release(path.read_text()) if (path := rootfs / _OS_RELEASE).is_file() else {}
        document = merged(python, installed_debian_packages(status.read_text()), release, image_properties)
    errors = schema_errors(document)
    if errors:
        raise SbomError(f"the SBOM is not valid CycloneDX {SPEC_VERSION}: {errors}")
    missing = missing_pins(document, locked_pins(lock.read_text()))
    if missing:
        raise SbomError(f"the image lacks what {lock.name} pins: {', '.join(missing)}")
    return document
