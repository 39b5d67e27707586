"""``--timeout`` values as kubectl writes them (``30s``, ``1m``, ``1m30s``, ``500ms``); a bare number
is seconds."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_seconds(text: str) -> float:
    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    if not value or _PART.sub("", value):
        raise ValueError(f"invalid duration {text!r}: expected e.g. 30s, 1m or 1m30s")
    return sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(value))
