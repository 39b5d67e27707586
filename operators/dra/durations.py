"""Durations as Kubernetes writes them: Go's syntax (``500ms``, ``30s``, ``1m30s``, ``1.5h``).

Two readings, one grammar:

- :func:`parse_go_duration` for API fields (the attacher's policies), which the CRD schema
  restricts to :data:`GO_DURATION_PATTERN`; admission can be bypassed, so anything else still
  raises.
- :func:`duration_seconds` for command-line flags and settings, which also take a plain number of
  seconds, as kubectl's ``--timeout`` and the operators' options do.

Neither takes a sign: no duration here may be negative.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

GO_DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
"""The pattern the project's CRDs give their duration fields."""

_WHOLE = re.compile(GO_DURATION_PATTERN)
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_PLAIN_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _go_seconds(text: str) -> float | None:
    if not _WHOLE.fullmatch(text):
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _PART.findall(text))


def parse_go_duration(text: str) -> timedelta:
    seconds = _go_seconds(text)
    if seconds is None:
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m or 1h30m")
    try:
        return timedelta(seconds=seconds)
    except OverflowError as err:  # the pattern bounds the digits, not the value: a billion days
        raise ValueError(f"{text!r} is longer than any duration can be") from err


def duration_seconds(value: Any) -> float:
    """Seconds from a Go duration or a plain number of seconds (surrounding blanks ignored)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if _PLAIN_SECONDS.fullmatch(text):
            return float(text)
        seconds = _go_seconds(text)
        if seconds is not None:
            return seconds
    raise ValueError(f"invalid duration {value!r}: expected e.g. 500ms, 30s, 1m30s or a number of seconds")


def format_seconds(value: timedelta | float) -> str:
    """A duration for messages: whole seconds when exact, otherwise one decimal."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.1f}s"
