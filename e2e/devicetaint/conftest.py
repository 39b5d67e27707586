"""Fixtures of the devicetaint tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from devcluster.kube import Kube
from e2e.devicetaint.world import World, open_world
from e2e.support import Tracker


@pytest.fixture
def world(api: Kube, objects: Tracker, namespace: str, unique_name: Callable[[str], str]) -> Iterator[World]:
    with open_world(api, objects, unique_name("node"), namespace) as opened:
        yield opened
