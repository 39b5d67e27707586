"""The kubectl-dra distribution as a user installs it, from PyPI into new virtualenvs: ``pip install``
of the wheel, and krew's archive whose launcher installs it on the first run. ``make test-dist``
runs these (marked ``dist``, not ``unit``: they take a minute and need PyPI)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from devcluster import dist
from devcluster.release import project_version

pytestmark = [pytest.mark.dist, pytest.mark.timeout(900)]

CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints.txt"
NO_KOPF = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('kopf') is None else 1)"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    made = dist.build_plugin(out, say=lambda _: None)
    wheel = next(p for p in made if p.suffix == ".whl")
    return {"wheel": wheel, "krew": dist.krew_archive(wheel, out, project_version())}


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, check=False, env=env
    )


def test_pip_installs_the_plugin_alone(built: dict[str, Path], tmp_path: Path) -> None:
    bin_dir = dist.clean_venv(tmp_path / "venv", built["wheel"])
    assert run(bin_dir / "python", "-c", NO_KOPF).returncode == 0, "kopf was installed with kubectl-dra"
    installed = run(bin_dir / "python", "-m", "pip", "list", "--format", "freeze").stdout.lower()
    assert f"kubectl-dra=={project_version()}" in installed
    assert "dra-operators" not in installed
    helped = run(bin_dir / "kubectl-dra", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "usage: kubectl dra" in helped.stdout
    assert "pools" in helped.stdout


def test_the_krew_archive_installs_the_plugin_on_its_first_run(
    built: dict[str, Path], tmp_path: Path
) -> None:
    with tarfile.open(built["krew"]) as tar:
        tar.extractall(tmp_path, filter="data")
    launcher = tmp_path / "kubectl-dra"
    assert os.access(launcher, os.X_OK)
    env = {**os.environ, "PIP_CONSTRAINT": str(CONSTRAINTS)}
    first = run(sys.executable, launcher, "--help", env=env)
    assert first.returncode == 0, first.stderr
    assert "first run, installing" in first.stderr
    assert "usage: kubectl dra" in first.stdout
    again = run(sys.executable, launcher, "completion", "bash", env=env)
    assert again.returncode == 0, again.stderr
    assert again.stderr == "", "the second run installed again"
    assert "kubectl" in again.stdout
    assert run(tmp_path / "venv" / "bin" / "python", "-c", NO_KOPF).returncode == 0
