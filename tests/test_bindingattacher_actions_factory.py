from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from bindingattacher_builders import attach_request, refused_action

from operators.bindingattacher import api
from operators.bindingattacher.actions.base import (
    ENTRY_POINT_GROUP,
    ActionConfigError,
    Operation,
    supports_probe,
)
from operators.bindingattacher.actions.calls import close_action, invoke
from operators.bindingattacher.actions.factory import BuildContext, build_action
from operators.bindingattacher.models import ActionSpec


class FabricAction:
    """What a third-party action looks like, written against the public API only."""

    def __init__(self, config: Mapping[str, Any], context: api.ActionContext) -> None:
        self.config = config
        self.context = context
        self.closed = False
        self.attached: dict[str, str | None] = {}

    async def validate(self) -> None:
        if "switch" not in self.config:
            raise ValueError("config.switch is required")

    async def attach(self, request: api.AttachRequest) -> api.AttachResult:
        if request.device.name == "broken":
            raise api.PermanentActionError("no path from this node to the device")
        self.attached[request.attachment_key] = request.node.name if request.node else None
        return api.AttachResult(
            api.Outcome.SUCCEEDED, f"via {self.config['switch']}", {"switch": self.config["switch"]}
        )

    async def probe(self, request: api.AttachRequest) -> api.AttachResult:
        return api.AttachResult(api.Outcome.IN_PROGRESS, retry_after_seconds=1.0)

    async def detach(self, request: api.AttachRequest) -> api.AttachResult:
        self.attached.pop(request.attachment_key, None)
        return api.AttachResult(api.Outcome.SUCCEEDED)

    async def close(self) -> None:
        self.closed = True


def fabric_factory(config: Mapping[str, Any], context: api.ActionContext) -> FabricAction:
    return FabricAction(config, context)


def broken_factory(config: Mapping[str, Any], context: api.ActionContext) -> object:
    raise RuntimeError("cannot reach the fabric manager")


def fake_entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    module = __name__
    return [
        importlib.metadata.EntryPoint("fabric", f"{module}:fabric_factory", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("broken", f"{module}:broken_factory", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint(
            "missing-module", "no_such_module_for_dra_tests:factory", ENTRY_POINT_GROUP
        ),
        importlib.metadata.EntryPoint("elsewhere", f"{module}:fabric_factory", "some.other.group"),
    ]


def spec(entry_point: str, config: dict[str, Any] | None = None) -> ActionSpec:
    return ActionSpec.model_validate(
        {"kind": "Python", "python": {"entryPoint": entry_point, "config": config or {"switch": "sw-2"}}}
    )


CONTEXT = BuildContext(policy_name="fabric", entry_points=fake_entry_points)


async def test_entry_point_action_attaches_and_detaches() -> None:
    built = await build_action(spec("fabric"), CONTEXT)
    action = built.action
    assert isinstance(action, FabricAction)
    assert action.context.policy_name == "fabric"
    assert built.description == "python action fabric"
    assert supports_probe(action)
    request = attach_request()
    attached = await invoke(action, Operation.ATTACH, request, 5)
    assert attached.result.outcome is api.Outcome.SUCCEEDED
    assert attached.result.data == {"switch": "sw-2"}
    assert action.attached == {request.attachment_key: "node-a"}
    probed = await invoke(action, Operation.PROBE, request, 5)
    assert probed.result.outcome is api.Outcome.IN_PROGRESS
    await invoke(action, Operation.DETACH, request, 5)
    assert action.attached == {}
    await close_action(action)
    assert action.closed


async def test_permanent_error_from_the_action() -> None:
    built = await build_action(spec("fabric"), CONTEXT)
    outcome = await invoke(built.action, Operation.ATTACH, attach_request(device="broken"), 5)
    assert outcome.result.outcome is api.Outcome.PERMANENT_ERROR
    assert outcome.result.message == "no path from this node to the device"


@pytest.mark.parametrize(
    ("entry_point", "config", "reason", "fragment"),
    [
        (
            "does-not-exist",
            None,
            "UnknownEntryPoint",
            "no entry point 'does-not-exist' in group dra_operators.attach_actions",
        ),
        ("elsewhere", None, "UnknownEntryPoint", "'elsewhere'"),
        ("missing-module", None, "EntryPointLoadFailed", "ModuleNotFoundError"),
        ("broken", None, "InvalidActionConfig", "cannot reach the fabric manager"),
        ("fabric", {"other": 1}, "InvalidActionConfig", "config.switch is required"),
        ("fabric", {"blob": "x" * 17000}, "InvalidActionConfig", "16384-byte limit"),
    ],
)
async def test_policy_errors(
    entry_point: str, config: dict[str, Any] | None, reason: str, fragment: str
) -> None:
    error = await refused_action(spec(entry_point, config), CONTEXT)
    assert error.reason == reason
    assert fragment in error.message


async def test_installed_entry_points_are_the_default_source() -> None:
    error = await refused_action(spec("surely-not-installed"), BuildContext(policy_name="p"))
    assert error.reason == "UnknownEntryPoint"


async def test_sub_objects_must_match_the_kind() -> None:
    mixed = ActionSpec.model_validate({"kind": "Noop", "python": {"entryPoint": "fabric"}})
    with pytest.raises(ActionConfigError, match="must not set python"):
        await build_action(mixed, CONTEXT)


class SubclassedAction(api.BaseAction):
    """A third-party action written on the base class: attach only, close inherited."""

    async def attach(self, request: api.AttachRequest) -> api.AttachResult:
        return api.AttachResult(api.Outcome.SUCCEEDED, "attached")


async def test_an_action_on_the_base_class_is_called_like_any_other() -> None:
    action = SubclassedAction()
    assert isinstance(action, api.AttachAction)
    assert not supports_probe(action)
    request = attach_request()
    attached = await invoke(action, Operation.ATTACH, request, 5)
    assert (attached.result.outcome, attached.result.message) == (api.Outcome.SUCCEEDED, "attached")
    probed = await invoke(action, Operation.PROBE, request, 5)
    assert probed.result.outcome is api.Outcome.SUCCEEDED, "without a probe, the attach is repeated"
    detached = await invoke(action, Operation.DETACH, request, 5)
    assert detached.result.outcome is api.Outcome.TRANSIENT_ERROR
    assert detached.result.message.startswith("NotImplementedError")
    await close_action(action)
