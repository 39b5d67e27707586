"""The one entry point: `dra-operators run <name>` and `python -m operators <name>`."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from devcluster.constants import REPO_ROOT
from operators import OPERATOR_NAMES
from operators.cli import main, parse_settings


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


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--leader-elect=false"], False),
        (["--leader-elect=true"], True),
        (["--leader-elect"], True),
        (["--no-leader-elect"], False),
        ([], False),
    ],
)
def test_boolean_flags_take_values_as_kubernetes_components_do(argv: list[str], expected: bool) -> None:
    assert parse_settings("resourceclaim", argv).leader_elect is expected


def test_a_bad_boolean_is_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_settings("resourceclaim", ["--leader-elect=maybe"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "'maybe' is not a boolean (true or false)" in err[0]


def _shipped_args() -> list[tuple[str, list[str]]]:
    found = []
    for path in sorted((REPO_ROOT / "manifests").glob("*/deployment.yaml")):
        deployment = yaml.safe_load(path.read_text())
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        found.append((args[1], args[2:]))
    ha = yaml.safe_load((REPO_ROOT / "manifests/overlays/ha/kustomization.yaml").read_text())
    replaced = [
        op["value"] for op in yaml.safe_load(ha["patches"][0]["patch"]) if op["path"].endswith("/args/2")
    ]
    managed = yaml.safe_load((REPO_ROOT / "manifests/overlays/managed/kustomization.yaml").read_text())
    added = [op["value"] for patch in managed["patches"] for op in yaml.safe_load(patch["patch"])]
    poolstatus = next(args for name, args in found if name == "poolstatus")
    return found + [(name, replaced) for name, _ in found] + [("poolstatus", [*poolstatus, *added])]


@pytest.mark.parametrize(("name", "args"), _shipped_args())
def test_the_shipped_deployments_arguments_parse(name: str, args: list[str]) -> None:
    # The manifests once passed --leader-elect=false, which the parser refused: every pod
    # exited with a usage error.
    parse_settings(name, args)
