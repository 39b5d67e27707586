"""Fixtures of the poolstatus tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster.kube import Kube
from e2e import harness
from e2e.poolstatus.support import RequestTracker, install_crd, tracked_requests


@pytest.fixture(scope="module", autouse=True)
def _crd(cluster: harness.Cluster) -> None:
    install_crd(cluster)


@pytest.fixture
def requests(api: Kube) -> Iterator[RequestTracker]:
    with tracked_requests(api) as tracker:
        yield tracker
