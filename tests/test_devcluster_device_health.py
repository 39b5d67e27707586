"""The test driver's control file as the devcluster writes it: what a test sets is what the driver
reads (the driver's side runs in e2e/product/test_realnode.py), and clearing every device leaves no
file, which the driver reads as every device Healthy and untainted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devcluster import realnode

TAINT = {"key": "dra-operators.test/unhealthy", "value": "ecc", "effect": "None"}


@pytest.fixture
def node(tmp_path: Path) -> realnode.NodeLayout:
    layout = realnode.NodeLayout.of(tmp_path)
    layout.disk.mkdir()
    return layout


def test_set_writes_each_device_and_clear_removes_the_file(node: realnode.NodeLayout) -> None:
    realnode.set_device_health(node, "gpu-1", "Unhealthy", TAINT)
    realnode.set_device_health(node, "gpu-2", "Unknown")
    assert json.loads(node.device_health.read_text()) == {
        "gpu-1": {"health": "Unhealthy", "taint": TAINT},
        "gpu-2": {"health": "Unknown"},
    }
    realnode.set_device_health(node, "gpu-1", "Healthy")
    assert json.loads(node.device_health.read_text())["gpu-1"] == {"health": "Healthy"}
    realnode.clear_device_health(node, "gpu-2")
    assert list(json.loads(node.device_health.read_text())) == ["gpu-1"]
    realnode.clear_device_health(node)
    assert not node.device_health.exists()
    assert list(node.disk.iterdir()) == [], "a staged file was left beside the control file"


@pytest.mark.parametrize(
    ("health", "taint", "why"),
    [
        ("Broken", None, "health"),
        ("Unhealthy", {**TAINT, "effect": "PreferNoSchedule"}, "effect"),
        ("Unhealthy", {"key": "k"}, "effect"),
    ],
)
def test_values_the_driver_would_refuse_are_refused_here(
    node: realnode.NodeLayout, health: str, taint: dict[str, str] | None, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        realnode.set_device_health(node, "gpu-0", health, taint)
    assert not node.device_health.exists()
