"""The README's ``kubectl dra`` maintenance session is a recorded run of :data:`demo.maintenance.MAINTENANCE`
(whose commands the e2e tier plays), so the documented commands are the tested ones."""

from __future__ import annotations

from demo import transcripts
from demo.maintenance import BEGIN, MAINTENANCE, README


def test_readme_shows_the_maintenance_commands() -> None:
    recorded = transcripts.read(README, BEGIN)
    assert transcripts.commands(recorded) == MAINTENANCE.commands, (
        "the README's kubectl dra session is out of date: run `python -m demo.maintenance --record`"
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
