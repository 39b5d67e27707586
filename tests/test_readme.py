"""The README: the two commands come first, and its links work where it is shown."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
# Inline links and images; the README's code blocks hold none.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_starts_with_the_two_commands() -> None:
    head = README.read_text().split("```")[1]
    assert "make run" in head
    assert "make test" in head


def test_every_link_of_the_readme_is_absolute() -> None:
    """The README is the package's description on PyPI too (pyproject.toml), where a link relative
    to the repository, or to an anchor of the page, leads nowhere. `make docs` checks where they go."""
    relative = [target for target in LINK.findall(README.read_text()) if not target.startswith("https://")]
    assert relative == [], "write https://github.com/dra-operators/dra-operators/blob/main/<path> instead"
