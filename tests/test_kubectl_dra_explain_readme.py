"""The README's ``kubectl dra explain`` session is what explain says about docs/examples/explain.yaml.

The session was recorded on a devcluster; kube-scheduler's own sentence comes from the pod's
status there, so it is taken from the README, and every other line must be what the code says now.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from operators.kubectl_dra.explain import ExplainQuery, render
from operators.kubectl_dra.explainmodel import Snapshot, explain_pod

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def test_readme_explain_session_is_current() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"\$ kubectl dra explain pod trainer -n ml\n(.*?)```", readme, re.S)
    assert block is not None, "the README shows a kubectl dra explain session"
    shown = block.group(1)
    scheduler = re.search(r"^- kube-scheduler says: (.*)$", shown, re.M)
    assert scheduler is not None
    snapshot = Snapshot()
    for doc in yaml.safe_load_all((ROOT / "docs/examples/explain.yaml").read_text()):
        meta = doc["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if doc["kind"] == "ResourceSlice":
            snapshot.slices.append(doc)
        elif doc["kind"] == "DeviceClass":
            snapshot.classes[meta["name"]] = doc
        elif doc["kind"] == "ResourceClaim":
            snapshot.claims[key] = doc
        elif doc["kind"] == "Pod":
            doc["status"] = {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "message": scheduler.group(1)}],
            }
            snapshot.pods[key] = doc
    query = ExplainQuery("pod", "ml", "trainer")
    assert render(query, explain_pod(snapshot, "ml", "trainer")) == shown
