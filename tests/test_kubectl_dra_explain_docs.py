"""The ``kubectl dra explain`` sessions of docs/kubectl-dra.md are what explain says about their objects.

The first, about docs/examples/explain.yaml, was recorded on a devcluster; kube-scheduler's own
sentence comes from the pod's status there, so it is taken from the page, and every other line
must be what the code says now. The second, about device health (docs/examples/explain-health.yaml),
carries the statuses in the file, as the kubelet and the operators write them, and is rendered.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators.kubectl_dra.explain import ExplainQuery, render
from operators.kubectl_dra.explainmodel import Snapshot, explain_pod

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _shown(command: str) -> str:
    page = (ROOT / "docs" / "kubectl-dra.md").read_text()
    block = re.search(rf"\$ {re.escape(command)}\n(.*?)```", page, re.S)
    assert block is not None, f"docs/kubectl-dra.md shows a `{command}` session"
    return block.group(1)


def _snapshot(objects: str, pod_status: Callable[[dict[str, Any]], None] = lambda pod: None) -> Snapshot:
    snapshot = Snapshot()
    for doc in yaml.safe_load_all((ROOT / objects).read_text()):
        meta = doc["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if doc["kind"] == "ResourceSlice":
            snapshot.slices.append(doc)
        elif doc["kind"] == "DeviceClass":
            snapshot.classes[meta["name"]] = doc
        elif doc["kind"] == "DeviceTaintRule":
            snapshot.rules.append(doc)
        elif doc["kind"] == "ResourceClaim":
            snapshot.claims[key] = doc
        elif doc["kind"] == "Pod":
            pod_status(doc)
            snapshot.pods[key] = doc
    return snapshot


def test_the_explain_session_is_current() -> None:
    shown = _shown("kubectl dra explain pod trainer -n ml")
    scheduler = re.search(r"^- kube-scheduler says: (.*)$", shown, re.M)
    assert scheduler is not None

    def pending(pod: dict[str, Any]) -> None:
        pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": scheduler.group(1)}],
        }

    snapshot = _snapshot("docs/examples/explain.yaml", pending)
    query = ExplainQuery("pod", "ml", "trainer")
    assert render(query, explain_pod(snapshot, "ml", "trainer")) == shown


def test_the_device_health_session_is_current() -> None:
    shown = _shown("kubectl dra explain pod inference -n ml")
    snapshot = _snapshot("docs/examples/explain-health.yaml")
    query = ExplainQuery("pod", "ml", "inference")
    assert render(query, explain_pod(snapshot, "ml", "inference")) == shown
