"""The real node's image registry: Debian's ``docker-registry`` (the CNCF distribution registry,
2.8) on a loopback port, serving TLS with a certificate of the devcluster's CA.

containerd trusts it through a ``hosts.toml`` in its ``config_path`` (the CA, nothing else), so the
kubelet pulls from it as from any registry. ``make release-artifacts`` pushes the operator image
(skopeo) and the chart (``helm push``) to it; the deployed tiers install from it.

Where things live: ``<state>/node/registry/`` (the registry's storage and configuration) and
``<state>/node/certs.d/<host:port>/`` (containerd's ``hosts.toml`` and the CA, which skopeo reads
as a ``--cert-dir`` too).
"""

from __future__ import annotations

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
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class RegistryError(RuntimeError):
    pass


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
        request = urllib.request.Request(
            f"https://{self.address}/v2/{path}", headers={"Accept": ", ".join(accept)} if accept else {}
        )
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                return json.loads(answer.read() or b"{}"), dict(answer.headers.items())
        except urllib.error.HTTPError as err:
            raise RegistryError(f"GET /v2/{path}: HTTP {err.code} {err.read()[:300]!r}") from err

    def platforms(self, repository: str, reference: str) -> dict[str, str]:
        """``os/architecture`` -> manifest digest of the image index at ``reference``."""
        index, _ = self.get(f"{repository}/manifests/{reference}", INDEX_MEDIA_TYPES)
        return {
            f"{m['platform']['os']}/{m['platform']['architecture']}": str(m["digest"])
            for m in index.get("manifests") or []
            if "platform" in m
        }


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


def _run(args: list[str], what: str, timeout: float = 600) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RegistryError(f"{what} failed ({proc.returncode}):\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    return proc.stdout + proc.stderr


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
    out = _run(
        [str(helm), "push", str(package), registry.chart_url(), "--ca-file", str(registry.ca_file)],
        f"helm push {package.name}",
        timeout=120,
    )
    found = re.search(r"Digest:\s*(sha256:[0-9a-f]{64})", out)
    if found is None:
        raise RegistryError(f"helm push printed no digest:\n{out[-1000:]}")
    return found.group(1)
