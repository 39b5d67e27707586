"""A replica that loses its Lease starts over in the same process, as a standby: an API server
outage longer than the renew deadline must not restart the container."""

from __future__ import annotations

from typing import Any

import pytest

from operators import cli
from operators.core import gc_tuning, runtime

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _untuned_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() tunes the process's collector; this process is pytest's."""
    monkeypatch.setattr(gc_tuning, "tune", lambda: None)


def _runs(monkeypatch: pytest.MonkeyPatch, answers: list[int], code: int) -> list[dict[str, Any]]:
    """The options of each run ``cli.main`` started, each run answering the next of ``answers``;
    ``code`` is what main must return."""
    runs: list[dict[str, Any]] = []

    async def fake_run(definition: Any, settings: Any, **options: Any) -> int:
        runs.append(options)
        return answers[len(runs) - 1]

    monkeypatch.setattr(runtime, "run", fake_run)
    assert cli.main(["run", "resourceclaim"]) == code
    return runs


def test_a_lost_lease_starts_a_new_run_in_the_same_process(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _runs(monkeypatch, [runtime.LEASE_LOST, runtime.LEASE_LOST, 0], 0)
    # Logging is set up once; each later run starts from nothing but the settings.
    assert [run["configure_logging"] for run in runs] == [True, False, False]


def test_every_run_counts_the_in_tree_controller_since_the_process_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The coexistence guard's verdict lasts until the process restarts: a run after a lost Lease
    must still count the in-tree controller's writes made before it began."""
    runs = _runs(monkeypatch, [runtime.LEASE_LOST, 0], 0)
    started = [run.get("started") for run in runs]
    assert started[0] is not None, "the first run is told when the process started"
    assert started == [started[0]] * len(runs), "each later run counts from the same start"


def test_any_other_answer_ends_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _runs(monkeypatch, [1], 1)
    assert len(runs) == 1
