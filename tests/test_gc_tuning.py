"""The operator process's collector settings take effect and freeze the start-up objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from operators.core import gc_tuning


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tune_freezes_startup_objects_and_sets_thresholds(restored_collector: None) -> None:
    assert gc.get_freeze_count() == 0
    gc_tuning.tune()
    assert gc.get_threshold() == gc_tuning.THRESHOLDS
    assert gc.get_freeze_count() > 1000
