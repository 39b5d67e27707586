"""The real node's registry: its configuration, containerd's trust of it, and where its clients
find the CA (no registry is started here)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

from devcluster import registry
from devcluster.constants import LOOPBACK

pytestmark = pytest.mark.unit


def test_the_registry_listens_on_loopback_with_tls(tmp_path: Path) -> None:
    hub = registry.at(tmp_path / "node", 5443)
    config_path = registry.write_files(
        hub, tmp_path / "node" / "registry" / "storage", 5443, b"CA PEM", Path("/k/r.crt"), Path("/k/r.key")
    )
    config = yaml.safe_load(config_path.read_text())
    assert config["http"]["addr"] == f"{LOOPBACK}:5443"
    assert config["http"]["tls"] == {"certificate": "/k/r.crt", "key": "/k/r.key"}
    assert config["storage"]["filesystem"]["rootdirectory"] == str(tmp_path / "node" / "registry" / "storage")
    assert hub.address == "localhost:5443"
    assert hub.ca_file.read_bytes() == b"CA PEM"


def test_containerd_trusts_the_registry_through_its_hosts_toml(tmp_path: Path) -> None:
    hub = registry.at(tmp_path / "node", 5443)
    registry.write_files(hub, tmp_path / "storage", 5443, b"CA PEM", Path("/r.crt"), Path("/r.key"))
    # containerd looks up <config_path>/<host:port>/hosts.toml; skopeo reads the same directory.
    assert hub.cert_dir == tmp_path / "node" / "certs.d" / "localhost:5443"
    hosts = tomllib.loads((hub.cert_dir / "hosts.toml").read_text())
    assert hosts["server"] == "https://localhost:5443"
    assert hosts["host"]["https://localhost:5443"] == {
        "capabilities": ["pull", "resolve"],
        "ca": str(hub.ca_file),
    }


def test_names_of_what_is_pushed() -> None:
    hub = registry.Registry("localhost:5443", Path("/c/ca.crt"))
    assert hub.image() == "localhost:5443/dra-operators"
    assert hub.chart_url() == "oci://localhost:5443/charts"


INDEX_DIGEST = "sha256:" + "0f" * 32


def test_the_referrers_of_a_digest_are_under_the_tag_schemas_tag() -> None:
    assert registry.referrers_tag(INDEX_DIGEST) == "sha256-" + "0f" * 32
    with pytest.raises(registry.RegistryError):
        registry.referrers_tag("latest")


def _referrer(artifact_type: str | None, digest: str, created: str | None) -> dict[str, object]:
    entry: dict[str, object] = {
        "mediaType": registry.OCI_MANIFEST,
        "digest": digest,
        "size": 700,
    }
    if artifact_type is not None:
        entry["artifactType"] = artifact_type
    if created is not None:
        entry["annotations"] = {registry.CREATED_ANNOTATION: created}
    return entry


def test_a_release_published_twice_names_its_newest_sbom() -> None:
    # The tag schema's index as oras leaves it: every attach adds an entry, in no promised order.
    index = {
        "schemaVersion": 2,
        "mediaType": registry.OCI_INDEX,
        "manifests": [
            _referrer(registry.SBOM_ARTIFACT_TYPE, "sha256:" + "2" * 64, "2026-12-05T10:00:00Z"),
            _referrer("application/vnd.dev.cosign.artifact.sig.v1+json", "sha256:" + "3" * 64, None),
            _referrer(registry.SBOM_ARTIFACT_TYPE, "sha256:" + "1" * 64, "2026-12-04T10:00:00Z"),
            _referrer(None, "sha256:" + "4" * 64, None),
        ],
    }
    assert registry.newest_by_artifact_type(index) == {
        registry.SBOM_ARTIFACT_TYPE: "sha256:" + "2" * 64,
        "application/vnd.dev.cosign.artifact.sig.v1+json": "sha256:" + "3" * 64,
    }
    assert registry.newest_by_artifact_type({"manifests": []}) == {}


def test_oras_attaches_through_the_tag_schema_over_tls_with_the_devcluster_ca() -> None:
    hub = registry.Registry("localhost:5443", Path("/c/ca.crt"))
    args = registry.attach_args(hub, INDEX_DIGEST, "dra-operators-0.1.0.cdx.json")

    def value(flag: str) -> str:
        return args[args.index(flag) + 1]

    assert args[0] == "attach"
    assert value("--artifact-type") == "application/vnd.cyclonedx+json"
    # distribution 2.8 has no referrers API; oras would otherwise speak plain HTTP to localhost.
    assert value("--distribution-spec") == "v1.1-referrers-tag"
    assert "--plain-http=false" in args
    assert value("--ca-file") == "/c/ca.crt"
    assert value("--format") == "json"
    assert args[-2:] == [
        f"localhost:5443/dra-operators@{INDEX_DIGEST}",
        "dra-operators-0.1.0.cdx.json:application/vnd.cyclonedx+json",
    ]
