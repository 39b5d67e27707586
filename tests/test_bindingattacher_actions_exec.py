from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
import yaml
from bindingattacher_builders import attach_request, refused_action

from operators.bindingattacher.actions.base import Operation, Outcome
from operators.bindingattacher.actions.calls import invoke
from operators.bindingattacher.actions.execcommand import (
    DANGEROUS_ENV,
    MAX_STDOUT_BYTES,
    ExecAction,
    command_problem,
    env_problem,
)
from operators.bindingattacher.actions.factory import BuildContext, build_action
from operators.bindingattacher.models import ActionSpec


def script(tmp_path: Path, body: str, name: str = "action.sh") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def read(path: str) -> str:
    return Path(path).read_text()


def exists(path: str) -> bool:
    return Path(path).exists()


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a reaper."""
    try:
        os.kill(pid, 0)
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def test_exec_receives_the_document_and_a_minimal_environment(tmp_path: Path) -> None:
    out = tmp_path / "captured"
    command = script(
        tmp_path,
        'cat > "$OUT"\nenv > "$OUT.env"\npwd > "$OUT.pwd"\n'
        'echo \'{"outcome": "Succeeded", "message": "attached", "data": {"port": 7}}\'\n',
    )
    action = ExecAction([command], {"OUT": str(out)})
    outcome = await invoke(action, Operation.ATTACH, attach_request(), 10)
    assert outcome.result.outcome is Outcome.SUCCEEDED
    assert outcome.result.message == "attached"
    assert outcome.result.data == {"port": 7}
    sent = json.loads(out.read_text())
    assert sent["operation"] == "Attach"
    env = dict(line.split("=", 1) for line in read(f"{out}.env").splitlines() if "=" in line)
    assert env["DRA_OPERATORS_OPERATION"] == "attach"
    assert env["DRA_OPERATORS_ATTACHMENT_KEY"] == sent["attachmentKey"]
    allowed = {"PATH", "HOME", "LANG", "OUT", "DRA_OPERATORS_OPERATION", "DRA_OPERATORS_ATTACHMENT_KEY"}
    # The shell itself may add PWD, SHLVL and "_".
    assert set(env) - allowed <= {"PWD", "SHLVL", "_", "OLDPWD"}
    workdir = read(f"{out}.pwd").strip()
    assert not exists(workdir)  # removed after the call


async def test_exit_codes(tmp_path: Path) -> None:
    request = attach_request()
    empty = await invoke(
        ExecAction([script(tmp_path, "exit 0\n", "empty.sh")]), Operation.DETACH, request, 10
    )
    assert empty.result.outcome is Outcome.SUCCEEDED
    permanent = ExecAction([script(tmp_path, "echo 'no path to device' >&2\nexit 2\n", "perm.sh")])
    failed = await invoke(permanent, Operation.ATTACH, request, 10)
    assert (failed.result.outcome, failed.result.message) == (Outcome.PERMANENT_ERROR, "no path to device")
    with_json = ExecAction([script(tmp_path, 'echo \'{"message": "switch full"}\'\nexit 2\n', "json.sh")])
    assert (await invoke(with_json, Operation.ATTACH, request, 10)).result.message == "switch full"
    flaky = ExecAction([script(tmp_path, "echo busy >&2\nexit 1\n", "flaky.sh")])
    transient = await invoke(flaky, Operation.ATTACH, request, 10)
    assert transient.result.outcome is Outcome.TRANSIENT_ERROR
    assert transient.result.message.endswith("exited with 1: busy")
    garbage = ExecAction([script(tmp_path, "echo not-json\n", "garbage.sh")])
    assert (await invoke(garbage, Operation.ATTACH, request, 10)).result.outcome is Outcome.TRANSIENT_ERROR
    killed = ExecAction([script(tmp_path, "kill -9 $$\n", "killed.sh")])
    died = await invoke(killed, Operation.ATTACH, request, 10)
    assert "killed by signal SIGKILL" in died.result.message


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_stdout_holding_a_number_json_cannot_carry_is_read_as_a_webhook_body_is(
    tmp_path: Path, number: str
) -> None:
    document = f'{{"outcome": "Succeeded", "message": "switch full", "data": {{"x": {number}}}}}'
    succeeded = ExecAction([script(tmp_path, f"echo '{document}'\n", "ok.sh")])
    outcome = await invoke(succeeded, Operation.ATTACH, attach_request(), 10)
    assert outcome.result.outcome is Outcome.TRANSIENT_ERROR
    assert outcome.result.message.startswith("invalid JSON in response: ")
    assert number in outcome.result.message
    assert outcome.result.data is None
    refused = ExecAction([script(tmp_path, f"echo '{document}'\necho 'no path' >&2\nexit 2\n", "perm.sh")])
    failed = await invoke(refused, Operation.ATTACH, attach_request(), 10)
    assert (failed.result.outcome, failed.result.message) == (Outcome.PERMANENT_ERROR, "no path")


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = script(tmp_path, f'sleep 30 &\necho "$$ $!" > {pids}\nwait\n')
    outcome = await invoke(
        ExecAction([command], kill_grace_seconds=1.0), Operation.ATTACH, attach_request(), 0.5
    )
    assert outcome.timed_out
    assert outcome.result.outcome is Outcome.TRANSIENT_ERROR
    shell, child = (int(p) for p in pids.read_text().split())
    assert gone_within([shell, child], 5)


async def test_sigkill_follows_an_ignored_sigterm(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = script(tmp_path, f"trap '' TERM\necho $$ > {pids}\nwhile true; do sleep 0.1; done\n")
    started = time.monotonic()
    outcome = await invoke(
        ExecAction([command], kill_grace_seconds=0.3), Operation.ATTACH, attach_request(), 0.5
    )
    assert outcome.timed_out
    assert time.monotonic() - started < 5
    assert gone_within([int(pids.read_text())], 5)


def test_command_checks(tmp_path: Path) -> None:
    allowed = str(tmp_path)
    assert command_problem(["relative/tool"], allowed) == (
        "InvalidActionConfig",
        "spec.action.exec.command[0]: 'relative/tool' must be an absolute path",
    )
    problem = command_problem([str(tmp_path / "missing")], allowed)
    assert problem is not None
    assert problem[0] == "CommandNotFound"
    assert command_problem([script(tmp_path, "exit 0\n")], allowed) is None


def test_only_the_operators_commands_run(tmp_path: Path) -> None:
    """Issue #38: whoever creates a policy would otherwise run any binary of the image (a shell,
    python3) as the attacher, with its ServiceAccount token."""
    allowed = tmp_path / "commands"
    allowed.mkdir()
    mine = script(allowed, "exit 0\n")
    outside = script(tmp_path, "exit 0\n", "outside.sh")
    (allowed / "sneaky").symlink_to(outside)
    assert command_problem([mine], str(allowed)) is None
    assert command_problem(["/bin/sh", "-c", "id"], str(allowed))[0] == "CommandNotAllowed"  # type: ignore[index]
    assert command_problem([str(allowed / "sneaky")], str(allowed))[0] == "CommandNotAllowed"  # type: ignore[index]
    assert command_problem([str(allowed / ".." / "outside.sh")], str(allowed))[0] == "CommandNotAllowed"  # type: ignore[index]
    reason, message = command_problem([mine], "") or ("", "")
    assert reason == "ExecNotConfigured"
    assert "--exec-commands-dir" in message


@pytest.mark.parametrize(
    "name",
    [
        "BASH_ENV",
        "ENV",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PATH",
        "NODE_OPTIONS",
        "PERL5OPT",
    ],
)
def test_variables_that_load_code_are_refused(name: str) -> None:
    assert env_problem(name) is not None
    assert env_problem("GPU_FABRIC") is None


async def test_factory_rejects_reserved_env_and_missing_commands(tmp_path: Path) -> None:
    good = script(tmp_path, "exit 0\n")
    context = BuildContext(policy_name="p", exec_commands_dir=str(tmp_path))
    for name in ("DRA_OPERATORS_X", "BASH_ENV"):
        refused = ActionSpec.model_validate(
            {"kind": "Exec", "exec": {"command": [good], "env": [{"name": name, "value": "1"}]}}
        )
        error = await refused_action(refused, context)
        assert error.reason == "InvalidActionConfig"
    missing = ActionSpec.model_validate({"kind": "Exec", "exec": {"command": [str(tmp_path / "attach")]}})
    error = await refused_action(missing, context)
    assert error.reason == "CommandNotFound"
    built = await build_action(
        ActionSpec.model_validate({"kind": "Exec", "exec": {"command": [good]}}), context
    )
    assert built.description == f"exec action {good}"
    error = await refused_action(
        ActionSpec.model_validate({"kind": "Exec", "exec": {"command": [good]}}), BuildContext("p")
    )
    assert error.reason == "ExecNotConfigured"


async def test_a_flood_of_output_is_read_and_dropped(tmp_path: Path) -> None:
    """100 MiB on stdout and stderr: the call ends with a clear error, and only the caps are kept."""
    command = script(tmp_path, "head -c 104857600 /dev/zero | tr '\\0' x\nhead -c 104857600 /dev/zero >&2\n")
    result = await ExecAction([command]).attach(attach_request())
    assert result.outcome is Outcome.TRANSIENT_ERROR
    assert result.message == f"{command}: stdout exceeds {MAX_STDOUT_BYTES} bytes"


async def test_nothing_the_command_forked_outlives_its_call(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = script(
        tmp_path,
        f"(trap '' TERM; while true; do sleep 0.1; done) & echo $! > {pids}\n"
        'echo \'{"outcome": "Succeeded"}\'\n',
    )
    result = await ExecAction([command]).attach(attach_request())
    assert result.outcome is Outcome.SUCCEEDED
    assert gone_within([int(pids.read_text())], 5)


async def test_no_writable_tmp_is_a_transient_error_that_names_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tempfile

    command = script(tmp_path, 'echo \'{"outcome": "Succeeded"}\'\n')
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    result = await ExecAction([command]).attach(attach_request())
    assert result.outcome is Outcome.TRANSIENT_ERROR
    assert result.message.startswith(f"no working directory for {command}: ")
    assert "emptyDir at /tmp" in result.message


def test_the_crd_refuses_the_same_variables() -> None:
    """The API server refuses them at admission, with the same expression the factory uses."""
    crd = yaml.safe_load(
        (Path(__file__).parents[1] / "crds" / "deviceattachpolicies.dra-operators.io.yaml").read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    name = schema["properties"]["spec"]["properties"]["action"]["properties"]["exec"]["properties"]["env"][
        "items"
    ]["properties"]["name"]
    rules = [rule["rule"] for rule in name["x-kubernetes-validations"]]
    assert f"!self.matches('{DANGEROUS_ENV.pattern}')" in rules
