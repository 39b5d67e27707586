"""``kubectl dra taint``, ``untaint``, ``drain`` and ``completion`` without a cluster: the arguments,
the objects' bodies and names, what untaint removes, the question, the preview text, drain's
decisions and progress, and the completion script."""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from strategies import pod_consumer

from operators.dra.claims import ConsumerReference
from operators.dra.pools import DeviceId
from operators.dra.taints import DeviceTaint, DeviceTaintSelector
from operators.kubectl_dra import cli, commands, completion, maintain
from operators.kubectl_dra import session as session_module
from operators.kubectl_dra import taintmodel as model
from operators.kubectl_dra.console import Console
from operators.kubectl_dra.errors import EXIT_USAGE, PluginError, UsageError
from operators.kubectl_dra.previewmodel import (
    ClaimRow,
    DryRun,
    PodRow,
    Preview,
)

DRV = "gpu.example.com"
NOW = datetime(2026, 9, 1, 10, 0, tzinfo=UTC)


def _consumer(name: str, uid: str) -> ConsumerReference:
    """A ``reservedFor`` entry naming a pod."""
    return ConsumerReference.model_validate(pod_consumer(name, uid))


def parse(*argv: str) -> object:
    return cli._parser().parse_args(argv)


# --- arguments ----------------------------------------------------------------------------------------


def test_taint_arguments() -> None:
    args = parse("taint", f"driver={DRV},pool=n1", "--effect", "NoExecute", "--yes", "--wait", "-n", "ml")
    assert args.target == DeviceTaintSelector(driver=DRV, pool="n1")  # type: ignore[attr-defined]
    assert (args.effect, args.yes, args.wait, args.namespace) == ("NoExecute", True, True, "ml")  # type: ignore[attr-defined]
    assert args.key == model.DEFAULT_KEY  # type: ignore[attr-defined]
    by_class = parse("taint", "--class", "gpu", "--selector", "a", "--selector", "b")
    assert (by_class.target, by_class.device_class, by_class.cel) == (None, "gpu", ["a", "b"])  # type: ignore[attr-defined]
    assert by_class.effect == "NoSchedule"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "argv",
    [
        ("taint", "--effect", "Evict", DRV),
        ("taint", DRV, "-n", "a", "-A"),
        ("taint", DRV, "--name", "Not_A_Label"),
        ("drain", "pool", "no-slash"),
        ("drain", "pool", f"{DRV}/p", "--grace", "-5"),
        ("drain", "pool", f"{DRV}/p", "--timeout", "0s"),
        ("drain", "rack", "r1"),
        ("completion", "fish"),
    ],
)
def test_bad_arguments_are_usage_errors(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(list(argv))
    assert exited.value.code == EXIT_USAGE
    capsys.readouterr()


def test_drain_arguments() -> None:
    args = parse("drain", "pool", f"{DRV}/node-1", "--grace", "30", "--timeout", "2m", "--ignore-tolerating")
    assert args.subject == DeviceTaintSelector(driver=DRV, pool="node-1")  # type: ignore[attr-defined]
    assert (args.grace, args.timeout, args.ignore_tolerating) == (30.0, 120.0, True)  # type: ignore[attr-defined]
    node = parse("drain", "node", "worker-3", "--grace", "1m")
    assert (node.drained, node.subject, node.grace, node.timeout) == ("node", "worker-3", 60.0, 300.0)  # type: ignore[attr-defined]


def test_drain_help_explains_toleration_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["drain", "pool", "--help"])
    text = capsys.readouterr().out
    assert "with tolerationSeconds: the pod stays that many seconds" in text
    assert "without tolerationSeconds: the pod stays for good" in text


def test_taint_without_devices_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["taint", "--yes"]) == EXIT_USAGE
    assert "say which devices" in capsys.readouterr().err


# --- targets, names, bodies ---------------------------------------------------------------------------


def test_a_driver_pool_device_target_is_a_rule_and_a_class_or_cel_a_selector() -> None:
    rule = model.make_target(DeviceTaintSelector(driver=DRV, pool="p"), None, ())
    assert not rule.needs_selector_object
    taint = model.taint_body("k", "", "NoExecute")
    assert model.rule_body("resource.k8s.io/v1", "n", rule, taint) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": "n",
            "labels": {model.CREATED_BY_LABEL: "kubectl-dra", model.NAME_LABEL: "n"},
        },
        "spec": {
            "deviceSelector": {"driver": DRV, "pool": "p"},
            "taint": {"key": "k", "effect": "NoExecute"},
        },
    }
    cel = model.make_target(DeviceTaintSelector(driver=DRV), "gpu", ["device.attributes['x'].y"])
    assert cel.needs_selector_object
    body = model.selector_body("n", cel, model.taint_body("k", "v", "None"), label="drain-x")
    assert body["apiVersion"] == "dra-operators.io/v1alpha1"
    assert body["metadata"]["labels"][model.NAME_LABEL] == "drain-x"
    assert body["spec"] == {
        "deviceSelector": {
            "deviceClassName": "gpu",
            "driver": DRV,
            "selectors": [{"cel": {"expression": "device.attributes['x'].y"}}],
        },
        "taint": {"key": "k", "value": "v", "effect": "None"},
    }
    with pytest.raises(ValueError, match="no class or CEL"):
        model.rule_body("v1", "n", cel, taint)
    with pytest.raises(UsageError):
        model.make_target(None, None, ())


def test_default_names_are_stable_label_values_per_target_and_key() -> None:
    target = model.make_target(DeviceTaintSelector(driver=DRV, pool="Node_1"), None, ())
    name = model.default_name(target, "k")
    assert name == model.default_name(target, "k")
    assert name != model.default_name(target, "other")
    assert name.startswith("kdra-gpu-example-com-node-1-")
    long = model.make_target(DeviceTaintSelector(driver="d" * 63, pool="p" * 200), None, ())
    for made in (model.default_name(long, "k"), model.drain_name("pool", long.selector)):
        assert model.check_name(made) == made
    assert model.drain_name("node", "worker-1") == "drain-node-worker-1"
    with pytest.raises(PluginError):
        model.check_name("x" * 64)


def test_an_update_removes_what_the_wanted_object_lacks() -> None:
    existing = {
        "metadata": {"labels": {"a": "b"}},
        "spec": {
            "deviceSelector": {"driver": DRV, "pool": "p"},
            "taint": {"key": "k", "value": "v", "effect": "N"},
        },
    }
    wanted = model.rule_body(
        "v1",
        "n",
        model.make_target(DeviceTaintSelector(driver=DRV), None, ()),
        model.taint_body("k", "", "E"),
    )
    assert model.update_patch(existing, wanted) == {
        "metadata": {"labels": model.labels("n")},
        "spec": {
            "deviceSelector": {"pool": None, "driver": DRV},
            "taint": {"value": None, "key": "k", "effect": "E"},
        },
    }


def _ours(selector: dict[str, object], key: str = "k", name: str = "n") -> dict[str, object]:
    return {
        "metadata": {"name": name, "uid": "u", "labels": model.labels(name)},
        "spec": {"deviceSelector": selector, "taint": {"key": key, "effect": "NoSchedule"}},
    }


def test_untaint_finds_only_ours_and_every_given_criterion_must_match() -> None:
    rule = _ours({"driver": DRV, "pool": "p"})
    cel = _ours({"deviceClassName": "gpu", "selectors": [{"cel": {"expression": "a"}}], "allDevices": False})
    by = model.Filter
    sel = DeviceTaintSelector
    assert by().matches(rule)
    assert not by().matches({**rule, "metadata": {"name": "n", "labels": {}}})
    assert by(target=model.make_target(sel(driver=DRV), None, ())).matches(rule)
    assert not by(target=model.make_target(sel(driver=DRV, device="g"), None, ())).matches(rule)
    assert by(target=model.make_target(None, "gpu", ())).matches(cel)
    assert by(target=model.make_target(None, None, ["a"])).matches(cel)
    assert not by(target=model.make_target(None, "gpu", ["b"])).matches(cel)
    assert not by(name="other").matches(rule)
    assert not by(key="other").matches(rule)
    removal = model.describe_object("DeviceTaintSelector", cel, "/x/n")
    assert (removal.target, removal.taint) == ("class=gpu,cel='a'", "k:NoSchedule")


# --- the question -------------------------------------------------------------------------------------


def _never(prompt: str) -> str:
    raise AssertionError("asked")


def test_yes_goes_on_without_asking_and_no_terminal_refuses() -> None:
    model.confirm("Taint?", yes=True, interactive=False, ask=_never)
    with pytest.raises(UsageError, match="stdin is not a terminal: pass --yes") as refused:
        model.confirm("Taint?", yes=False, interactive=False, ask=_never)
    assert refused.value.code == EXIT_USAGE


@pytest.mark.parametrize(
    ("answer", "goes_on"), [("y\n", True), ("YES\n", True), ("\n", False), ("no\n", False)]
)
def test_on_a_terminal_only_yes_goes_on(answer: str, goes_on: bool) -> None:
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return answer

    if goes_on:
        model.confirm("Taint?", yes=False, interactive=True, ask=ask)
    else:
        with pytest.raises(model.Declined):
            model.confirm("Taint?", yes=False, interactive=True, ask=ask)
    assert asked == ["Taint? [y/N] "]


class Terminal(io.StringIO):
    def __init__(self, text: str = "", tty: bool = True) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_console_asks_where_it_speaks_and_eof_is_no() -> None:
    out = Terminal()
    console = Console(True, stdin=Terminal(""), out=out)
    with pytest.raises(model.Declined):
        console.confirm("Drain?", yes=False)
    assert out.getvalue() == "Drain? [y/N] "


def test_progress_rewrites_one_line_on_a_terminal_and_prints_changes_elsewhere() -> None:
    tty = Terminal()
    live = Console(False, stdin=Terminal(), out=tty)
    live.progress("NoExecute: 2 to go", 9.6)
    live.progress("NoExecute: 1 to go", 8.0)
    live.say("done")
    assert tty.getvalue() == (
        "\r\033[KNoExecute: 2 to go (10s left)\r\033[KNoExecute: 1 to go (8s left)\ndone\n"
    )
    log = Terminal(tty=False)
    plain = Console(False, stdin=Terminal(), out=log)
    for line in ("NoExecute: 2 to go", "NoExecute: 2 to go", "NoExecute: 1 to go"):
        plain.progress(line, 5)
    assert log.getvalue() == "NoExecute: 2 to go\nNoExecute: 1 to go\n"


# --- the preview --------------------------------------------------------------------------------------


def _preview() -> Preview:
    devices = [DeviceId(DRV, "p", f"gpu-{i}") for i in range(3)]
    claims = [
        ClaimRow("a", "c1", (devices[0],), 0.0, (_consumer("p1", "u1"),)),
        ClaimRow("b", "c2", (devices[0],), None, (_consumer("p2", "u2"),)),
        ClaimRow("b", "c3", (devices[1],), 5.0, ()),
    ]
    pods = [PodRow("a", "p1", "n", ("c1",), 0.0), PodRow("b", "p2", "n", ("c2",), None)]
    taint = DeviceTaint(key="k", effect="NoExecute", time_added=NOW)
    dry_run = DryRun(3, 2, 2, 2, "3 published devices selected.")
    return Preview(DeviceTaintSelector(driver=DRV), taint, dry_run, devices, claims, pods)


def test_the_preview_groups_claims_and_pods_by_namespace() -> None:
    preview = _preview()
    text = commands.preview_text(preview, None)
    assert text.endswith("NAMESPACE  CLAIMS  PODS\na          1       1\nb          2       1\n")
    narrowed = commands.preview_text(preview, "a")
    assert "b/c2" not in narrowed
    assert narrowed.endswith("Only namespace a is shown; 1 affected pods are in other namespaces.\n")


# --- drain --------------------------------------------------------------------------------------------


def _pod(name: str, eviction: float | None, terminating: bool = False) -> model.DrainPod:
    return model.DrainPod("ns", name, terminating, eviction)


def test_a_drain_is_done_when_no_running_pod_must_go() -> None:
    assert model.drain_status([], False).done
    assert model.drain_status([_pod("gone", 0.0, terminating=True)], False).done
    status = model.drain_status(
        [_pod("a", 0.0), _pod("b", 30.0), _pod("t", None), _pod("x", 0.0, True)], False
    )
    assert not status.done
    assert [p.name for p in status.remaining] == ["a", "b", "t"]
    assert status.terminating == 1
    assert model.drain_line("NoExecute", status) == (
        "NoExecute: 2 to go, 1 terminating, 1 tolerating forever, next eviction in 30s"
    )


def test_tolerating_forever_stays_only_with_ignore_tolerating() -> None:
    pods = [_pod("t", None), _pod("gone", 0.0, terminating=True)]
    assert not model.drain_status(pods, False).done
    assert [p.key for p in model.drain_status(pods, False).remaining] == ["ns/t"]
    ignoring = model.drain_status(pods, True)
    assert ignoring.done
    assert model.names(ignoring.staying) == "ns/t"


# --- completion ---------------------------------------------------------------------------------------


def test_completion_knows_every_command_and_option() -> None:
    nodes = {n.path: n for n in completion.tree(cli._parser())}
    assert {"taint", "untaint", "drain", "drain node", "drain pool", "completion"} <= set(nodes)
    assert nodes["drain"].commands == ["node", "pool"]
    assert nodes["taint"].choices["--effect"] == ["NoSchedule", "NoExecute", "None"]
    assert "--ignore-tolerating" in nodes["drain pool"].options
    assert completion.zsh(cli._parser()).startswith("# kubectl dra completion for zsh")


def _complete(script: str, *words: str) -> list[str]:
    bash = shutil.which("bash")
    assert bash is not None
    program = (
        f"{script}\nCOMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; "
        '_kubectl_dra; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run([bash, "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_the_bash_script_completes_commands_options_and_choices() -> None:
    script = completion.bash(cli._parser())
    assert _complete(script, "kubectl-dra", "dr") == ["drain"]
    assert _complete(script, "kubectl", "dra", "drain", "p") == ["pool"]
    assert _complete(script, "kubectl-dra", "drain", "pool", "x", "--ig") == ["--ignore-tolerating"]
    assert _complete(script, "kubectl-dra", "taint", "--effect", "NoE") == ["NoExecute"]
    assert _complete(script, "kubectl-dra", "untaint", "--y") == ["--yes"]


def test_a_drain_run_again_does_not_lift_no_execute() -> None:
    target = model.make_target(DeviceTaintSelector(driver=DRV, pool="p"), None, ())
    existing = model.rule_body("v1", "n", target, model.taint_body("k", "", "NoExecute"))
    again = model.rule_body("v1", "n", target, model.taint_body("k", "", "NoSchedule"))
    other_key = model.rule_body("v1", "n", target, model.taint_body("j", "", "NoSchedule"))
    assert model.keeps_no_execute(existing, again)
    assert not model.keeps_no_execute(existing, other_key)
    assert not model.keeps_no_execute(again, existing)


# --- the flows: nothing changes before the answer -----------------------------------------------------


class Recorder:
    """Stands in for :mod:`.maintain`: the preview it returns, and every change asked of it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.changes: list[str] = []
        monkeypatch.setattr(maintain, "preview_target", self.preview_target)
        monkeypatch.setattr(maintain, "place", self.place)
        monkeypatch.setattr(maintain, "ours_matching", self.ours_matching)
        monkeypatch.setattr(maintain, "remove", self.remove)

    async def preview_target(
        self, session: object, target: model.Target, taint: object, timeout: float
    ) -> Preview:
        return _preview()

    async def place(self, session: object, target: model.Target, name: str, taint: dict[str, str]) -> object:
        self.changes.append(f"place {name} {taint['effect']}")
        return maintain.Placed("DeviceTaintRule", name, f"/rules/{name}", "created")

    async def ours_matching(self, session: object, wanted: model.Filter) -> list[model.Removal]:
        return [model.describe_object("DeviceTaintRule", _ours({"driver": DRV}), "/rules/n")]

    async def remove(self, session: object, removals: Sequence[model.Removal]) -> None:
        self.changes += [f"remove {r.name}" for r in removals]


def _order(**overrides: object) -> commands.TaintOrder:
    fields: dict[str, object] = {
        "target": model.make_target(DeviceTaintSelector(driver=DRV), None, ()),
        "name": "n",
        "key": "k",
        "value": "",
        "effect": "NoExecute",
        "timeout": 5.0,
        "namespace": None,
        "yes": False,
        "dry_run": False,
        "wait": False,
    }
    return commands.TaintOrder(**{**fields, **overrides})  # type: ignore[arg-type]


def _run_taint(order: commands.TaintOrder, stdin: str, tty: bool) -> tuple[Terminal, dict[str, object]]:
    out = Terminal(tty=False)
    console = Console(False, stdin=Terminal(stdin, tty=tty), out=out)
    document = asyncio.run(commands.taint(None, order, console))  # type: ignore[arg-type]
    return out, document


def test_taint_previews_then_refuses_without_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(monkeypatch)
    with pytest.raises(UsageError):
        _run_taint(_order(), "", tty=False)
    assert recorder.changes == []


def test_taint_dry_run_and_declined_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(monkeypatch)
    out, document = _run_taint(_order(dry_run=True), "", tty=False)
    assert "Dry run: nothing was tainted." in out.getvalue()
    assert "object" not in document
    with pytest.raises(model.Declined):
        _run_taint(_order(), "n\n", tty=True)
    assert recorder.changes == []


def test_taint_asks_after_the_preview_and_places_on_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(monkeypatch)
    out, document = _run_taint(_order(), "y\n", tty=True)
    text = out.getvalue()
    assert text.index("Preview of taint k:NoExecute") < text.index("Taint 3 devices with k:NoExecute? [y/N] ")
    assert recorder.changes == ["place n NoExecute"]
    assert document["object"] == {"kind": "DeviceTaintRule", "name": "n", "action": "created"}
    assert text.endswith("To remove it: kubectl dra untaint --name n\n")


def test_untaint_lists_asks_and_removes(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(monkeypatch)
    out = Terminal(tty=False)
    console = Console(False, Terminal(tty=False), out)
    session: Any = None
    with pytest.raises(UsageError):
        asyncio.run(commands.untaint(session, model.Filter(), False, console))
    assert recorder.changes == []
    assert "devicetaintrule/n" in out.getvalue()
    document = asyncio.run(commands.untaint(session, model.Filter(), True, console))
    assert recorder.changes == ["remove n"]
    assert document == {
        "removed": [
            {"kind": "DeviceTaintRule", "name": "n", "devices": f"driver={DRV}", "taint": "k:NoSchedule"}
        ]
    }


def test_following_an_eviction_waits_out_a_status_of_an_older_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session_module, "POLL_INTERVAL", 0)

    def selector(observed: int, message: str) -> dict[str, Any]:
        # The conditions do not say which generation they describe; their status does.
        conditions = [
            {"type": "Ready", "status": "True", "reason": "Ready"},
            {"type": "EvictionInProgress", "status": "False", "reason": "NoPods", "message": message},
        ]
        status = {"observedGeneration": observed, "conditions": conditions}
        return {"metadata": {"name": "n", "generation": 2}, "status": status}

    answers = [selector(1, "before the change"), selector(2, "after the change")]

    class Reader:
        async def get(self, purpose: str, path: str) -> dict[str, Any]:
            return answers.pop(0)

    placed = maintain.Placed(model.SELECTOR_KIND, "n", "/selectors/n", "updated")
    shown: list[str] = []
    session: Any = Reader()
    condition = asyncio.run(maintain.follow_eviction(session, placed, 5.0, shown.append))
    assert condition["message"] == "after the change"
    assert shown == ["EvictionInProgress=False NoPods: after the change"]
