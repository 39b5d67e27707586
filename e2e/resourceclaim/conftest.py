"""Fixtures of the resourceclaim tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devcluster.kube import Kube
from e2e import harness
from e2e.resourceclaim.support import on_both_sides


@pytest.fixture
def both_sides(
    api: Kube, upstream_cluster: harness.Cluster, upstream_api: Kube, operator: Callable[..., Any]
) -> Callable[[Callable[[Kube], Any]], tuple[Any, Any]]:
    """``both_sides(run)``: ``run`` on our operator's cluster and on the upstream-mode one at the
    same time (:func:`on_both_sides`), for the differential tests."""
    assert upstream_cluster.mode == "upstream-dra"
    return lambda run: on_both_sides(operator, run, api, upstream_api)
