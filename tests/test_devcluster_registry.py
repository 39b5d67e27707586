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
