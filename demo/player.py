"""Runs a scenario's commands as a user would type them, and keeps what they printed.

``kubectl`` is the cluster's kubectl binary, ``python`` this interpreter, and ``kubectl dra``
finds the plugin on ``$PATH`` the way kubectl finds every plugin: a ``kubectl-dra`` executable,
here a two-line shim around ``python -m operators.kubectl_dra`` so that the plugin from this
checkout runs even before the package's console script is installed. Every command gets
``$KUBECONFIG`` and runs from the repository root, so the paths in the READMEs work as written.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from demo.scenarios import Scenario, Step
from devcluster.constants import REPO_ROOT
from devcluster.kube import WaitTimeout, wait_for

SHIM = '#!/bin/sh\nexec "{python}" -m operators.kubectl_dra "$@"\n'


class StepFailed(AssertionError):
    pass


@dataclass(frozen=True)
class Played:
    step: Step
    output: str


def transcript(played: list[Played]) -> str:
    """The console text of a run: each step's comment, its command after ``$``, and its output."""
    chunks = []
    for item in played:
        comment = f"# {item.step.say}\n" if item.step.say else ""
        output = item.output if item.output.endswith("\n") or not item.output else item.output + "\n"
        chunks.append(f"{comment}$ {item.step.command}\n{output}")
    return "\n".join(chunks)


class Player:
    def __init__(self, kubectl: str, kubeconfig: str, echo: Callable[[str], None] | None = None) -> None:
        self.kubectl = kubectl
        self.kubeconfig = kubeconfig
        self.echo = echo
        self._bin = Path(tempfile.mkdtemp(prefix="dra-demo-bin-"))
        shim = self._bin / "kubectl-dra"
        shim.write_text(SHIM.format(python=sys.executable))
        shim.chmod(0o755)

    def close(self) -> None:
        shutil.rmtree(self._bin, ignore_errors=True)

    def _env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self._bin), str(Path(self.kubectl).parent), os.environ.get("PATH", "")])
        return {**os.environ, "KUBECONFIG": self.kubeconfig, "PATH": path}

    def _argv(self, command: str) -> list[str]:
        argv = shlex.split(command)
        if argv[0] == "kubectl":
            argv[0] = self.kubectl
        elif argv[0] == "python":
            argv[0] = sys.executable
        return argv

    def run(self, command: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._argv(command),
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env=self._env(),
            timeout=timeout,
            check=False,
        )

    def step(self, step: Step) -> Played:
        def attempt() -> subprocess.CompletedProcess[str]:
            done = self.run(step.command, timeout=step.within + 30)
            if done.returncode != 0:
                raise StepFailed(f"$ {step.command}\nexit code {done.returncode}\n{done.stdout}{done.stderr}")
            return done

        if step.until is None:
            done = attempt()
        else:
            last: list[subprocess.CompletedProcess[str]] = []

            def reached() -> bool:
                last[:] = [attempt()]
                return bool(step.until and step.until(last[0].stdout))

            try:
                wait_for(reached, step.within, f"the output of {step.command!r} to show the outcome", 0.5)
            except WaitTimeout:
                raise StepFailed(
                    f"$ {step.command}\nnever showed the outcome; last output:\n{last[0].stdout}"
                ) from None
            done = last[0]
        played = Played(step, done.stdout + done.stderr)
        if self.echo is not None:
            self.echo(transcript([played]))
        return played

    def play(self, scenario: Scenario, start: int = 0, stop: int | None = None) -> list[Played]:
        return [self.step(step) for step in scenario.steps[start:stop]]
