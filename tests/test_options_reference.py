"""The options reference of docs/reference.md is generated from the settings models, and kept current."""

from __future__ import annotations

from pathlib import Path

from operators.cli import options_markdown

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def test_options_reference_is_current() -> None:
    text = REFERENCE.read_text()
    section = text.split("<!-- options:begin -->\n", 1)[1].split("\n<!-- options:end -->", 1)[0]
    assert section == options_markdown(), "run `dra-operators options` and paste it into docs/reference.md"
