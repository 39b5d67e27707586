"""Every configuration error of ``dra-operators run`` is one line on stderr and exit code 2.

The CLI runs in-process with a scrubbed environment (no ``$KUBECONFIG``, no in-cluster variables,
``HOME`` in a temporary directory), the process-wide GC tuning and log set-up switched off; one
case runs as a subprocess, to see exactly what a shell sees.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from operators import cli
from operators.core import gc_tuning, logs

NO_CREDENTIALS = (
    "dra-operators: error: no Kubernetes credentials: pass --kubeconfig, set KUBECONFIG, run in a pod, "
    "or create ~/.kube/config"
)
# Never bound by the tests, so that a test that gets past the credentials cannot collide.
LOCAL = [
    "--metrics-bind-address",
    "127.0.0.1:0",
    "--health-probe-bind-address",
    "127.0.0.1:0",
    "--metrics-secure=false",
]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("DRA_OPERATORS_", "KUBERNETES_SERVICE_")) or name in (
            "KUBECONFIG",
            "POD_NAMESPACE",
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(gc_tuning, "tune", lambda: None)
    monkeypatch.setattr(logs, "setup", lambda *args, **kwargs: None)
    return tmp_path


def kubeconfig(path: Path, current: str = "local", server: str = "http://127.0.0.1:1") -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "local", "cluster": {"server": server}}],
                "users": [{"name": "local", "user": {"token": "t"}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "local"}}],
                "current-context": current,
            }
        )
    )
    return str(path)


def error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = cli.main(argv)
    except SystemExit as exit_info:  # argparse's own errors
        code = int(str(exit_info.code))
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == ""
    assert captured.err.endswith("\n")
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("dra-operators: error: ")
    return captured.err.rstrip("\n")


def test_no_credentials_anywhere(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert error_of(["run", "resourceclaim", *LOCAL], capsys) == NO_CREDENTIALS


def test_kubeconfig_variable_is_read_before_the_service_account(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bug of the issue: with only $KUBECONFIG set, the in-cluster config was tried."""
    path = kubeconfig(home / "config", current="elsewhere")
    monkeypatch.setenv("KUBECONFIG", path)
    assert error_of(["run", "bindingattacher", *LOCAL], capsys) == (
        f'dra-operators: error: kubeconfig {path} has no context "elsewhere" (its current-context); '
        "its contexts: local"
    )


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda home: ["--kubeconfig", str(home / "nope")], "--kubeconfig {home}/nope: no such file"),
        (
            lambda home: ["--kubeconfig", write(home / "bad", "clusters: [\n")],
            "kubeconfig {home}/bad is not valid YAML at line 2, column 1: expected the node content, "
            "but found '<stream end>'",
        ),
        (
            lambda home: ["--kubeconfig", kubeconfig(home / "config", current="gone")],
            'kubeconfig {home}/config has no context "gone" (its current-context); its contexts: local',
        ),
    ],
    ids=["missing-file", "malformed", "missing-context"],
)
def test_unusable_kubeconfig(
    home: Path, capsys: pytest.CaptureFixture[str], setup: object, expected: str
) -> None:
    args = setup(home)  # type: ignore[operator]
    assert error_of(["run", "devicetaint", *args, *LOCAL], capsys) == (
        "dra-operators: error: " + expected.format(home=home)
    )


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        (
            ["--kube-api-burst", "0"],
            {},
            "invalid settings: --kube-api-burst=0: Input should be greater than or equal to 1",
        ),
        (
            [],
            {"DRA_OPERATORS_WORKERS": "many"},
            "invalid settings: DRA_OPERATORS_WORKERS=many: Input should be a valid integer, unable to "
            "parse string as an integer",
        ),
        (
            ["--namespace", "Dra_Operators"],
            {},
            "invalid settings: --namespace=Dra_Operators: 'Dra_Operators' is not a namespace name "
            "(lower-case letters, digits and '-')",
        ),
        (
            ["--metrics-bind-address", "8080"],
            {},
            "invalid settings: --metrics-bind-address=8080: '8080' is not host:port "
            "(e.g. :8080, 127.0.0.1:8080 or [::1]:8080)",
        ),
        (
            ["--log-format", "xml"],
            {},
            "argument --log-format: invalid choice: 'xml' (choose from 'text', 'json') "
            "(see 'dra-operators run resourceclaim --help')",
        ),
        (
            ["--no-such-flag"],
            {},
            "unrecognized arguments: --no-such-flag (see 'dra-operators run resourceclaim --help')",
        ),
    ],
    ids=["flag-range", "env-type", "namespace-name", "address", "choice", "unknown-flag"],
)
def test_bad_flag_values(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    environ: dict[str, str],
    expected: str,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert error_of(["run", "resourceclaim", *argv], capsys) == f"dra-operators: error: {expected}"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run"], "name an operator: "),
        (["run", "nosuch"], "unknown operator 'nosuch'; choose one of: "),
        (["frobnicate"], "argument COMMAND: invalid choice: 'frobnicate'"),
    ],
)
def test_bad_commands(home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert error_of(argv, capsys).startswith(f"dra-operators: error: {expected}")


def test_a_port_in_use(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The usual second operator started on one machine with the default ports."""
    config = kubeconfig(home / "config")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        argv = ["run", "taintselector", "--kubeconfig", config, "--health-probe-bind-address", address]
        assert error_of([*argv, "--metrics-bind-address", "127.0.0.1:0"], capsys) == (
            f"dra-operators: error: cannot listen on {address} (--health-probe-bind-address): "
            "Address already in use"
        )


def test_a_shell_sees_one_line_and_status_2(tmp_path: Path) -> None:
    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "operators", "run", "poolstatus", *LOCAL],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environ,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", NO_CREDENTIALS + "\n")
