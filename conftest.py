"""Test tiers: everything under tests/ is ``unit`` (but what is marked ``dist``), everything under
e2e/ is ``e2e``.

The e2e tier runs the smoke test first; with ``CI=true`` a skipped e2e test fails the run.

The property tests of the unit tier (``tests/test_properties_*.py``) run under the Hypothesis
profile ``unit``. Every property states its own number of examples (each module's docstring
lists them); the profile fixes what they share. No deadline: a loaded two-core machine can take
ten times longer for one example than an idle one, and a timing failure would say nothing about
the code. No example database: it would be written into the checkout; a failure prints the blob
that reproduces it instead. ``HYPOTHESIS_PROFILE=thorough`` runs ten times as many examples of
every property (``tests/strategies.py``, ``examples``), for a longer search by hand; some then
take longer than the per-test timeout, so pass ``PYTEST_ARGS=--timeout=0`` with it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).parent

settings.register_profile(
    "unit",
    max_examples=100,
    deadline=None,
    database=None,
    print_blob=True,
    # The strategies build whole clusters, which on a slow machine is slow to generate too.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", parent=settings.get_profile("unit"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "unit"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT).parts
        if parts and parts[0] == "tests":
            # The distribution tests need PyPI and minutes; make test-dist runs them.
            if not item.get_closest_marker("dist"):
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
