"""The recorded runs in the READMEs.

Each scenario README holds one console block between two markers. ``python -m demo --record``
replaces it with the output of a real run, so the README shows what the commands really print;
``tests/test_demo_docs.py`` checks that the block's commands are exactly the scenario's, in
order, so the documented commands and the tested ones are the same list.
"""

from __future__ import annotations

import re
from pathlib import Path

BEGIN = "<!-- transcript: recorded by `python -m demo --record`; do not edit by hand -->"
END = "<!-- /transcript -->"


def _block(begin: str) -> re.Pattern[str]:
    return re.compile(re.escape(begin) + r"\n```console\n(.*?)```\n" + re.escape(END), re.DOTALL)


class MissingTranscript(ValueError):
    pass


def read(readme: Path, begin: str = BEGIN) -> str:
    """The block after ``begin``: a file with several transcripts tells them apart by their markers."""
    found = _block(begin).search(readme.read_text())
    if found is None:
        raise MissingTranscript(f"{readme}: no transcript block between the markers")
    return found.group(1)


def commands(text: str) -> list[str]:
    return [line[2:] for line in text.splitlines() if line.startswith("$ ")]


def write(readme: Path, text: str, begin: str = BEGIN) -> None:
    original = readme.read_text()
    pattern = _block(begin)
    if pattern.search(original) is None:
        raise MissingTranscript(f"{readme}: no transcript block between the markers")
    block = f"{begin}\n```console\n{text.rstrip()}\n```\n{END}"
    readme.write_text(pattern.sub(lambda _: block, original, count=1))
