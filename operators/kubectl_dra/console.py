"""Where the commands that change things talk to the user: text, the question, progress.

With ``-o json|yaml`` stdout carries only the document, so everything meant for a person goes to
stderr. Progress is one line rewritten in place on a terminal, and plain lines, each printed once,
anywhere else (a log keeps every change and no carriage returns).
"""

from __future__ import annotations

import sys
from typing import TextIO

from . import taintmodel


class Console:
    def __init__(self, machine_output: bool, stdin: TextIO | None = None, out: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.out = out or (sys.stderr if machine_output else sys.stdout)
        self.interactive = self.stdin.isatty()
        self.live = self.out.isatty()
        self._last = ""
        self._open = False

    def say(self, text: str) -> None:
        self._end_progress()
        self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()

    def ask(self, prompt: str) -> str:
        # The prompt goes where the text goes: never into a -o json document.
        self._end_progress()
        self.out.write(prompt)
        self.out.flush()
        answer = self.stdin.readline()
        if not answer:
            raise EOFError
        return answer

    def confirm(self, question: str, yes: bool) -> None:
        taintmodel.confirm(question, yes, self.interactive, self.ask)

    def progress(self, line: str, left: float) -> None:
        if self.live:
            self.out.write(f"\r\033[K{line} ({left:.0f}s left)")
            self.out.flush()
            self._open = True
        elif line != self._last:
            self.out.write(line + "\n")
            self.out.flush()
        self._last = line

    def _end_progress(self) -> None:
        if self._open:
            self.out.write("\n")
            self._open = False

    def close(self) -> None:
        self._end_progress()
        self.out.flush()
