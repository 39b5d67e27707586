"""The real node's image registry: Debian's ``docker-registry`` (the CNCF distribution registry,
2.8) on a loopback port, serving TLS with a certificate of the devcluster's CA.

containerd trusts it through a ``hosts.toml`` in its ``config_path`` (the CA, nothing else), so the
kubelet pulls from it as from any registry. ``make release-artifacts`` pushes the operator image
(skopeo) and the chart (``helm push``) to it, and attaches the image's SBOM to the image index
(``oras attach``); the deployed tiers install from it.

distribution 2.8 predates the OCI referrers API: an artifact that names a ``subject`` is found
through the referrers tag schema of the distribution spec 1.1, an OCI index tagged
``sha256-<hex of the subject's digest>`` in the subject's repository that lists every referrer
with its ``artifactType``. oras keeps that index up to date when it attaches;
:meth:`Registry.referrers` reads it.

Where things live: ``<state>/node/registry/`` (the registry's storage and configuration) and
``<state>/node/certs.d/<host:port>/`` (containerd's ``hosts.toml`` and the CA, which skopeo reads
as a ``--cert-dir`` too).
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .constants import LOOPBACK

BINARY_DIR = Path("/usr/bin")
BINARY = "docker-registry"
# The name images and charts carry: what a user types, resolved to LOOPBACK (the certificate
# names both).
HOST = "localhost"
OPERATOR_REPOSITORY = "dra-operators"
CHART_REPOSITORY = "charts"
INDEX_MEDIA_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_MEDIA_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
OCI_INDEX = INDEX_MEDIA_TYPES[0]
OCI_MANIFEST = MANIFEST_MEDIA_TYPES[0]
# CycloneDX's registered media type, as the SBOM's artifact type and its layer's media type.
SBOM_ARTIFACT_TYPE = "application/vnd.cyclonedx+json"
# The artifact's manifest annotation oras stamps with the time of the attach.
CREATED_ANNOTATION = "org.opencontainers.image.created"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class RegistryError(RuntimeError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Registry:
    """A running registry as its clients see it: ``address`` (host:port) and the CA that signed
    its certificate."""

    address: str
    ca_file: Path

    @property
    def cert_dir(self) -> Path:
        """containerd's hosts directory for this registry, which holds the CA as ``ca.crt``:
        what skopeo's ``--cert-dir`` and docker's ``certs.d`` read."""
        return self.ca_file.parent

    def image(self, repository: str = OPERATOR_REPOSITORY) -> str:
        return f"{self.address}/{repository}"

    def chart_url(self) -> str:
        return f"oci://{self.address}/{CHART_REPOSITORY}"

    def get(self, path: str, accept: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, str]]:
        """GET ``/v2/<path>`` of the registry's API: the JSON body and the headers."""
        body, headers = self.get_bytes(path, accept)
        return json.loads(body or b"{}"), headers

    def get_bytes(self, path: str, accept: tuple[str, ...] = ()) -> tuple[bytes, dict[str, str]]:
        """GET ``/v2/<path>`` of the registry's API: the body as served and the headers."""
        request = urllib.request.Request(
            f"https://{self.address}/v2/{path}", headers={"Accept": ", ".join(accept)} if accept else {}
        )
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                return answer.read(), dict(answer.headers.items())
        except urllib.error.HTTPError as err:
            raise RegistryError(f"GET /v2/{path}: HTTP {err.code} {err.read()[:300]!r}", err.code) from err

    def platforms(self, repository: str, reference: str) -> dict[str, str]:
        """``os/architecture`` -> manifest digest of the image index at ``reference``."""
        index, _ = self.get(f"{repository}/manifests/{reference}", INDEX_MEDIA_TYPES)
        return {
            f"{m['platform']['os']}/{m['platform']['architecture']}": str(m["digest"])
            for m in index.get("manifests") or []
            if "platform" in m
        }

    def referrers(self, repository: str, digest: str) -> dict[str, str]:
        """``artifactType`` -> manifest digest of the artifacts whose ``subject`` is ``digest``,
        from the referrers tag schema's index; none when that tag does not exist."""
        try:
            index, _ = self.get(f"{repository}/manifests/{referrers_tag(digest)}", (OCI_INDEX,))
        except RegistryError as err:
            if err.status == 404:
                return {}
            raise
        return newest_by_artifact_type(index)

    def blob(self, repository: str, digest: str) -> bytes:
        """The blob ``digest`` of ``repository``, checked against its digest."""
        body, _ = self.get_bytes(f"{repository}/blobs/{digest}")
        if f"sha256:{hashlib.sha256(body).hexdigest()}" != digest:
            raise RegistryError(f"the blob {digest} of {repository} does not match its digest")
        return body

    def attached_sbom(self, repository: str, subject_digest: str) -> AttachedSbom | None:
        """The newest SBOM artifact whose subject is ``subject_digest``; None without one."""
        found = self.referrers(repository, subject_digest).get(SBOM_ARTIFACT_TYPE)
        if found is None:
            return None
        manifest, _ = self.get(f"{repository}/manifests/{found}", (OCI_MANIFEST,))
        layers = [layer for layer in manifest.get("layers") or [] if layer["mediaType"] == SBOM_ARTIFACT_TYPE]
        if len(layers) != 1:
            raise RegistryError(f"the SBOM artifact {found} has {len(layers)} {SBOM_ARTIFACT_TYPE} layers")
        return AttachedSbom(found, str(layers[0]["digest"]))

    def sbom(self, repository: str, subject_digest: str) -> bytes:
        """The SBOM attached to ``subject_digest``, as it was pushed."""
        attached = self.attached_sbom(repository, subject_digest)
        if attached is None:
            raise RegistryError(f"{repository}@{subject_digest} has no {SBOM_ARTIFACT_TYPE} referrer")
        return self.blob(repository, attached.blob)


@dataclass(frozen=True)
class AttachedSbom:
    manifest: str  # the artifact's manifest digest, a referrer of its subject
    blob: str  # the SBOM document's digest


def referrers_tag(digest: str) -> str:
    """The tag under which the referrers tag schema keeps the referrers of ``digest``."""
    if not _DIGEST.fullmatch(digest):
        raise RegistryError(f"not a sha256 digest: {digest!r}")
    return digest.replace(":", "-", 1)


def newest_by_artifact_type(index: dict[str, Any]) -> dict[str, str]:
    """``artifactType`` -> digest of a referrers index's entries. Each attach adds an entry, so a
    subject may list an artifact type more than once (an SBOM attached again after it changed):
    the newest by its creation annotation is the one (entries without it count as oldest, in the
    index's order)."""
    ordered = sorted(
        index.get("manifests") or [],
        key=lambda entry: str((entry.get("annotations") or {}).get(CREATED_ANNOTATION, "")),
    )
    return {str(e["artifactType"]): str(e["digest"]) for e in ordered if e.get("artifactType")}


def at(node_disk: Path, port: int) -> Registry:
    address = f"{HOST}:{port}"
    return Registry(address, node_disk / "certs.d" / address / "ca.crt")


def config(storage: Path, port: int, certificate: Path, key: Path) -> dict[str, Any]:
    """The registry's configuration: loopback only, TLS, deletes allowed (a test may remove what it
    pushed)."""
    return {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(storage)}, "delete": {"enabled": True}},
        "http": {
            "addr": f"{LOOPBACK}:{port}",
            "tls": {"certificate": str(certificate), "key": str(key)},
            "headers": {"X-Content-Type-Options": ["nosniff"]},
        },
        "health": {"storagedriver": {"enabled": True, "interval": "10s", "threshold": 3}},
    }


def hosts_toml(address: str, ca_file: Path) -> str:
    """containerd's registry host configuration: pull and resolve over TLS, trusting ``ca_file``."""
    return (
        f'server = "https://{address}"\n\n'
        f'[host."https://{address}"]\n'
        '  capabilities = ["pull", "resolve"]\n'
        f'  ca = "{ca_file}"\n'
    )


def write_files(
    registry: Registry, storage: Path, port: int, ca: bytes, certificate: Path, key: Path
) -> Path:
    """The registry's configuration, and containerd's hosts.toml with the CA beside it; the
    configuration's path."""
    storage.mkdir(parents=True, exist_ok=True)
    registry.cert_dir.mkdir(parents=True, exist_ok=True)
    registry.ca_file.write_bytes(ca)
    (registry.cert_dir / "hosts.toml").write_text(hosts_toml(registry.address, registry.ca_file))
    path = storage.parent / "registry.yaml"
    path.write_text(yaml.safe_dump(config(storage, port, certificate, key), sort_keys=False))
    return path


def ready(registry: Registry) -> tuple[bool, str]:
    try:
        registry.get("")
    except (RegistryError, OSError, urllib.error.URLError, ValueError) as err:
        return False, str(err)
    return True, "ok"


# -- pushing --------------------------------------------------------------------------------


def _run(
    args: list[str], what: str, timeout: float = 600, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd)
    if proc.returncode != 0:
        raise RegistryError(f"{what} failed ({proc.returncode}):\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    return proc


def push_image(registry: Registry, source: str, tag: str) -> str:
    """Copy ``source`` (``oci-archive:...``, an image or an image index with every image it
    lists) to ``<registry>/dra-operators:<tag>``; the pushed manifest's (or index's) digest, by
    which manifests and the chart pin it."""
    target = f"docker://{registry.image()}:{tag}"
    digest_file = registry.cert_dir.parent / f".digest-{tag}"
    _run(
        [
            "skopeo",
            "copy",
            "--quiet",
            "--all",
            "--dest-cert-dir",
            str(registry.cert_dir),
            "--digestfile",
            str(digest_file),
            source,
            target,
        ],
        f"skopeo copy {source} {target}",
    )
    digest = digest_file.read_text().strip()
    digest_file.unlink()
    if not _DIGEST.fullmatch(digest):
        raise RegistryError(f"skopeo wrote {digest!r} as the digest of {target}")
    return digest


def push_chart(registry: Registry, helm: Path, package: Path) -> str:
    """``helm push`` of the packaged chart to ``oci://<registry>/charts``; the chart's digest."""
    pushed = _run(
        [str(helm), "push", str(package), registry.chart_url(), "--ca-file", str(registry.ca_file)],
        f"helm push {package.name}",
        timeout=120,
    )
    out = pushed.stdout + pushed.stderr
    found = re.search(r"Digest:\s*(sha256:[0-9a-f]{64})", out)
    if found is None:
        raise RegistryError(f"helm push printed no digest:\n{out[-1000:]}")
    return found.group(1)


def attach_args(registry: Registry, subject_digest: str, sbom_name: str) -> list[str]:
    """``oras attach``'s arguments (after the binary) for the SBOM file ``sbom_name`` of the
    current directory: oras refuses absolute paths, and names the layer after the path it got."""
    return [
        "attach",
        "--artifact-type",
        SBOM_ARTIFACT_TYPE,
        # distribution 2.8 has no referrers API: the tag schema named, not inferred by oras from
        # what the registry's answers lack.
        "--distribution-spec",
        "v1.1-referrers-tag",
        # oras speaks plain HTTP to a registry named localhost unless told not to.
        "--plain-http=false",
        "--ca-file",
        str(registry.ca_file),
        "--format",
        "json",
        f"{registry.image()}@{subject_digest}",
        f"{sbom_name}:{SBOM_ARTIFACT_TYPE}",
    ]


def attach_sbom(registry: Registry, oras: Path, subject_digest: str, sbom: Path) -> str:
    """Attach the SBOM at ``sbom`` to ``<registry>/dra-operators@<subject_digest>`` (the image
    index) as an OCI artifact of type ``application/vnd.cyclonedx+json``; the artifact manifest's
    digest. The same document attached before is kept: oras stamps each attach with its time, so
    a release published twice would list its SBOM twice."""
    if not _DIGEST.fullmatch(subject_digest):
        raise RegistryError(f"not a sha256 digest: {subject_digest!r}")
    before = registry.attached_sbom(OPERATOR_REPOSITORY, subject_digest)
    if before is not None and before.blob == f"sha256:{hashlib.sha256(sbom.read_bytes()).hexdigest()}":
        return before.manifest
    attached = _run(
        [str(oras), *attach_args(registry, subject_digest, sbom.name)],
        f"oras attach {sbom.name}",
        timeout=120,
        cwd=sbom.parent,
    )
    try:
        digest = str(json.loads(attached.stdout)["digest"])
    except (ValueError, KeyError, TypeError) as err:
        raise RegistryError(f"oras attach printed no digest:\n{attached.stdout[-1000:]}") from err
    if not _DIGEST.fullmatch(digest):
        raise RegistryError(f"oras attach printed {digest!r} as the SBOM artifact's digest")
    return digest
