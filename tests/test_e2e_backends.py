"""The e2e tier's own clean-up: a devcluster it stopped leaves no directory behind, logs included,
since a failed run has already copied them to the artifacts. No process is started here."""

from __future__ import annotations

from pathlib import Path

from e2e import backends


def test_a_stopped_devcluster_leaves_neither_its_directory_nor_the_tests_workdir(tmp_path: Path) -> None:
    directory = tmp_path / "dra-devcluster-x"
    (directory / "logs").mkdir(parents=True)
    (directory / "logs" / "kube-apiserver.log").write_text("served\n")
    workdir = tmp_path / "dra-e2e-x"
    workdir.mkdir()
    (workdir / "operator-resourceclaim-1.log").write_text("ready\n")

    backends.remove_devcluster(directory, workdir)

    assert not directory.exists()
    assert not workdir.exists()


def test_removing_twice_is_harmless(tmp_path: Path) -> None:
    """At exit the same clean-up runs again for a cluster its fixture already removed."""
    directory = tmp_path / "dra-devcluster-x"
    directory.mkdir()
    backends.remove_devcluster(directory)
    backends.remove_devcluster(directory)
    assert not directory.exists()
