"""The one duration grammar of the project: Go's, strict for API fields, and with plain seconds
for flags and settings."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from operators.dra.durations import duration_seconds, format_seconds, parse_go_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0.0), ("500ms", 0.5), ("30s", 30.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("1h1m1s1ms", 3661.001)],
)
def test_go_durations_read_as_go_reads_them(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == timedelta(seconds=seconds)
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "30", "1d", "-1s", "s", "1m 30s", " 30s", "1.s", ".5s", "nan", "inf"])
def test_api_fields_take_the_schema_pattern_only(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration such as"):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("value", "seconds"), [("20", 20.0), (" 1.5 ", 1.5), (7, 7.0), (0.25, 0.25), (" 1m ", 60.0)]
)
def test_flags_and_settings_also_take_plain_seconds(value: Any, seconds: float) -> None:
    assert duration_seconds(value) == seconds


@pytest.mark.parametrize(
    "value", ["", "abc", "1 h", "-1s", "-1", -1, True, None, "nan", "inf", "1e3", float("nan")]
)
def test_flags_and_settings_refuse_anything_else(value: Any) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        duration_seconds(value)


def test_format_seconds() -> None:
    assert format_seconds(timedelta(minutes=2)) == "120s"
    assert format_seconds(1.25) == "1.2s"


@pytest.mark.parametrize("text", ["99999999999999h", "2777777777777778h", "9" * 63 + "h"])
def test_an_api_duration_past_a_billion_days_is_refused_as_unreadable(text: str) -> None:
    # The schema's pattern and maxLength let it through; a timedelta cannot hold it.
    with pytest.raises(ValueError, match="is longer than any duration can be"):
        parse_go_duration(text)
