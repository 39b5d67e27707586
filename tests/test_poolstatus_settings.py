"""Settings of the pool-status operator (spec section 16): defaults, Go durations, modes."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from operators.core import settings as settings_mod
from operators.dra.durations import duration_seconds
from operators.poolstatus.settings import Settings


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0s", 0.0),
        ("500ms", 0.5),
        ("30s", 30.0),
        ("10m", 600.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("20", 20.0),
        (7, 7.0),
        (0.25, 0.25),
    ],
)
def test_durations(text: str | float, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1d", "-1s", "s", "1 h", "abc", True])
def test_bad_durations(text: str | bool) -> None:
    with pytest.raises(ValueError, match="duration"):
        duration_seconds(text)


def test_defaults_follow_the_spec() -> None:
    settings = Settings()
    assert (settings.builtin_api, settings.crd_api, settings.device_taint_rules) == ("auto", "auto", "auto")
    assert settings.discovery_interval == 60
    assert settings.incomplete_grace_period == 20  # Q1: fits the seed's `kubectl wait --timeout=30s`
    assert (settings.completed_ttl, settings.pending_ttl, settings.cleanup_interval) == (3600, 86400, 600)
    assert settings.max_status_bytes == 1_048_576


def _load(args: list[str], environ: dict[str, str]) -> Settings:
    parser = argparse.ArgumentParser()
    settings_mod.add_arguments(parser, Settings)
    loaded = settings_mod.from_arguments(Settings, parser.parse_args(args), environ)
    assert isinstance(loaded, Settings)
    return loaded


def test_flags_and_environment() -> None:
    loaded = _load(
        ["--cleanup-interval=1s", "--builtin-api=off"],
        {"DRA_OPERATORS_COMPLETED_TTL": "2m", "DRA_OPERATORS_INCOMPLETE_GRACE_PERIOD": "0s"},
    )
    assert (loaded.cleanup_interval, loaded.builtin_api) == (1.0, "off")
    assert (loaded.completed_ttl, loaded.incomplete_grace_period) == (120.0, 0.0)


def test_invalid_values_are_refused() -> None:
    with pytest.raises(ValidationError):
        _load([], {"DRA_OPERATORS_CRD_API": "maybe"})
    with pytest.raises(ValidationError):
        _load(["--cleanup-interval=0s"], {})
    with pytest.raises(ValidationError):
        _load(["--max-status-bytes=0"], {})
