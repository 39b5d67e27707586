"""Cutting a text to a limit: in characters, or in UTF-8 bytes on a character boundary.

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_a_cut_text_fits_its_limit_and_keeps_what_it_can``: 200
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from strategies import examples

from operators.core.texts import ELLIPSIS, truncate_chars, truncate_utf8


def test_a_byte_limit_cuts_on_a_character_boundary() -> None:
    assert truncate_utf8("a" * 255 + "é" + "b", 256) == "a" * 255
    assert truncate_utf8("a" * 254 + "é" + "b", 256) == "a" * 254 + "é"
    assert truncate_utf8("short", 256) == "short"


def test_a_marker_ends_a_cut_text_within_the_limit() -> None:
    assert truncate_utf8("é" * 10, 10, ELLIPSIS) == "ééé..."
    assert truncate_utf8("é" * 5, 10, ELLIPSIS) == "é" * 5, "a text that fits is not marked"
    assert truncate_chars("x" * 10, 8, ELLIPSIS) == "xxxxx..."
    assert truncate_chars("é" * 8, 8, ELLIPSIS) == "é" * 8
    assert truncate_chars("abc", 2) == "ab"
    assert truncate_chars("abcdef", 2, ELLIPSIS) == "ab", "a limit too small for the marker gets none"
    assert truncate_utf8("abcdef", 2, ELLIPSIS) == "ab"


def test_a_lone_surrogate_counts_as_go_reads_it_and_does_not_raise() -> None:
    # JSON's "\ud800" escape gives one; Go reads it as U+FFFD, three bytes.
    assert truncate_utf8("a\ud800b", 4) == "a\ud800"
    assert truncate_utf8("a\ud800b", 3) == "a"


@examples(200)
@given(st.text(max_size=300), st.integers(0, 200), st.sampled_from(["", ELLIPSIS, "\u2026"]))
def test_a_cut_text_fits_its_limit_and_keeps_what_it_can(text: str, limit: int, marker: str) -> None:
    for cut, size in (
        (truncate_utf8(text, limit, marker), lambda t: len(t.encode("utf-8", "surrogatepass"))),
        (truncate_chars(text, limit, marker), len),
    ):
        if size(text) <= limit:
            assert cut == text
            continue
        assert size(cut) <= limit
        kept = cut.removesuffix(marker) if size(marker) <= limit else cut
        assert text.startswith(kept)
        assert size(kept) > limit - size(marker) - 4, "no more is cut than the marker and one character"
