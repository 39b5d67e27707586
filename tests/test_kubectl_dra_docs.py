"""docs/kubectl-dra.md shows recorded runs: its maintenance session is one of
:data:`demo.maintenance.MAINTENANCE` (whose commands the e2e tier plays), and its ``kubectl dra pools``
output is the gpu-pool-status story's, so the documented commands are the tested ones."""

from __future__ import annotations

import re

from demo import transcripts
from demo.maintenance import BEGIN, MAINTENANCE, PAGE
from demo.scenarios import SCENARIOS


def test_the_page_shows_the_maintenance_commands() -> None:
    recorded = transcripts.read(PAGE, BEGIN)
    assert transcripts.commands(recorded) == MAINTENANCE.commands, (
        "docs/kubectl-dra.md's session is out of date: run `python -m demo.maintenance --record`"
    )


def test_every_manifest_is_used() -> None:
    commands = " ".join(MAINTENANCE.commands)
    files = sorted(p.name for p in MAINTENANCE.folder.glob("*.yaml"))
    assert files == ["1-driver.yaml", "2-workloads.yaml"]
    assert "python -m demo.fakedriver apply docs/kubectl-dra" in commands
    assert "kubectl apply -f docs/kubectl-dra/2-workloads.yaml" in commands


def test_every_new_command_is_shown() -> None:
    commands = [c.split()[2] for c in MAINTENANCE.commands if c.startswith("kubectl dra ")]
    assert set(commands) == {"taint", "drain", "untaint"}


def _session(text: str, command: str) -> str:
    """What ``text`` shows after ``$ command``, up to the next command, comment or end of its block."""
    found = re.search(rf"^\$ {re.escape(command)}\n(.*?)(?=^\$ |^# |^```|\Z)", text, re.M | re.S)
    assert found is not None, f"no `{command}` session"
    return found.group(1).strip("\n")


def test_the_pools_output_is_the_recorded_one() -> None:
    command = "kubectl dra pools --driver gpu.partitions.demo.example.com"
    assert command in SCENARIOS["gpu-pool-status"].commands
    recorded = transcripts.read(SCENARIOS["gpu-pool-status"].folder / "README.md")
    assert _session(PAGE.read_text(), command) == _session(recorded, command), (
        "copy the kubectl dra pools output of demo/gpu-pool-status/README.md into docs/kubectl-dra.md"
    )
