"""Plain-text tables and bars in kubectl's style: upper-case headers, columns left-aligned and
separated by two spaces, no trailing blanks. Pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

BAR_WIDTH = 20
ALLOCATED = "#"
UNAVAILABLE = "x"
FREE = "."


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "") -> list[str]:
    cells = [[str(h) for h in headers], *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return [
        (indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))).rstrip()
        for row in cells
    ]


def _half_up(value: Fraction) -> int:
    return int(value + Fraction(1, 2)) if value >= 0 else -int(-value + Fraction(1, 2))


def percent(part: Fraction | int, whole: Fraction | int) -> str:
    if whole <= 0:
        return "-"
    return f"{_half_up(Fraction(part) * 100 / Fraction(whole))}%"


def bar(segments: Sequence[tuple[Fraction | int, str]], whole: Fraction | int, width: int = BAR_WIDTH) -> str:
    """Consecutive segments of ``whole`` drawn with their characters, the rest with ``FREE``.

    Boundaries are rounded, except that a segment boundary strictly inside (0, whole) never lands
    on either end: one allocated device out of a thousand still shows, and so does one free one.
    """
    if whole <= 0:
        return " " * width
    out: list[str] = []
    drawn = 0
    cumulative = Fraction(0)
    for amount, char in segments:
        cumulative += Fraction(amount)
        boundary = _half_up(cumulative * width / Fraction(whole))
        if 0 < cumulative < whole:
            boundary = min(max(boundary, 1), width - 1)
        boundary = min(max(boundary, drawn), width)
        out.append(char * (boundary - drawn))
        drawn = boundary
    return "".join(out) + FREE * (width - drawn)
