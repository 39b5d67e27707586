"""The one entry point: `dra-operators run <name>` and `python -m operators <name>`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from operators import OPERATOR_NAMES
from operators.cli import main


def test_help_lists_every_operator(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in OPERATOR_NAMES:
        assert f"  {name} " in out


def test_unknown_operator_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "nosuch"]) == 2
    assert "unknown operator 'nosuch'" in capsys.readouterr().err


@pytest.mark.parametrize("name", OPERATOR_NAMES)
def test_run_help_documents_the_options(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", name, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--kubeconfig" in out
    assert "DRA_OPERATORS_KUBE_API_QPS" in out


def test_invalid_settings_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "resourceclaim", "--kube-api-burst", "0"]) == 2
    assert "invalid settings" in capsys.readouterr().err


def test_python_dash_m_is_the_same_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "operators", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0
    assert "resourceclaim" in proc.stdout
    short = subprocess.run(
        [sys.executable, "-m", "operators", "poolstatus", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert short.returncode == 0
    assert "--builtin-api" in short.stdout
