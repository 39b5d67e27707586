"""Fixtures of the product tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.product import support
from e2e.product.support import Installed


@pytest.fixture(scope="module")
def gpu_class(installed: Installed) -> Iterator[str]:
    """The test driver's DeviceClass on the module's installed cluster (its ``installed`` fixture)."""
    yield from support.gpu_class(installed)
