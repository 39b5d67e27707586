"""Test tiers: everything under tests/ is ``unit``, everything under e2e/ is ``e2e``.

The e2e tier runs the smoke test first; with ``CI=true`` a skipped e2e test fails the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT).parts
        if parts and parts[0] == "tests":
            item.add_marker(pytest.mark.unit)
        elif parts and parts[0] == "e2e":
            item.add_marker(pytest.mark.e2e)
    # The smoke test goes first, so a broken cluster stops the run before a cascade of timeouts.
    items.sort(key=lambda item: 0 if item.get_closest_marker("smoke") else 1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped and item.get_closest_marker("e2e"):
        report.outcome = "failed"
        report.longrepr = f"e2e test skipped under CI=true (skips are failures in CI): {report.longrepr}"
