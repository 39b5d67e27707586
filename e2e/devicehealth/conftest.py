"""Fixtures of the devicehealth e2e modules."""

from __future__ import annotations

import pytest

from devcluster.constants import REPO_ROOT
from e2e import harness
from e2e.devicehealth.support import CRD


@pytest.fixture(scope="module", autouse=True)
def crd(cluster: harness.Cluster) -> None:
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=e2e-devicehealth",
        "-f",
        str(REPO_ROOT / "crds" / f"{CRD}.yaml"),
    )
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=30s")
