"""Go-style duration strings (``1m30s``, ``500ms``, ``1.5h``), as used by every policy field.

The CRD schema admits exactly the pattern in :data:`DURATION_PATTERN` (spec §21.3), so a string
that reaches the attacher normally parses; :func:`parse_duration` still raises ``ValueError``
for anything else because admission can be bypassed (CRD installed without the schema, tests).
"""

from __future__ import annotations

import re
from datetime import timedelta

DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_WHOLE = re.compile(DURATION_PATTERN)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> timedelta:
    if not _WHOLE.fullmatch(text):
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m or 1h30m")
    seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _PART.findall(text))
    return timedelta(seconds=seconds)


def format_seconds(value: timedelta | float) -> str:
    """Render a duration for messages: whole seconds when exact, otherwise one decimal."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.1f}s"
