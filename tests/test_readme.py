"""The README's options reference is generated from the settings models, and kept current."""

from __future__ import annotations

from pathlib import Path

from operators.cli import options_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_starts_with_the_two_commands() -> None:
    head = README.read_text().split("```")[1]
    assert "make run" in head
    assert "make test" in head


def test_options_reference_is_current() -> None:
    text = README.read_text()
    section = text.split("<!-- options:begin -->\n", 1)[1].split("\n<!-- options:end -->", 1)[0]
    assert section == options_markdown(), "run `dra-operators options` and paste it into the README"
