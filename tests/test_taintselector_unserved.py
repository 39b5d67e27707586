"""A cluster that serves no DeviceTaintRule API (1.35 and 1.36 by default): the taintselector
operator stays ready and tells each DeviceTaintSelector why nothing is tainted and how to fix it;
``kubectl dra taint``, ``taint-preview`` and ``drain`` stop with the same text
(operators.dra.unserved) before they create anything."""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from typing import Any, cast

import pytest
from runtime_support import ServingClient, unit_runtime

from operators.core.discovery import ServedResource
from operators.core.keys import Key
from operators.core.runtime import Runtime
from operators.dra.taints import DeviceTaintSelector
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED
from operators.kubectl_dra import commands, maintain
from operators.kubectl_dra import taintmodel as model
from operators.kubectl_dra.console import Console
from operators.kubectl_dra.errors import PluginError
from operators.kubectl_dra.session import Session
from operators.taintselector.controller import SELECTOR, TaintSelectorController
from operators.taintselector.operator import DEFINITION
from operators.taintselector.settings import Settings
from operators.taintselector.status import READY, REASON_DEVICE_TAINT_RULE_UNAVAILABLE

pytestmark = pytest.mark.unit

GPU = "gpu.example.com"


def test_the_text_names_every_served_version_and_each_versions_remedy() -> None:
    assert DEVICE_TAINT_RULES_UNSERVED.startswith(
        "this cluster serves no DeviceTaintRule API (resource.k8s.io v1, v1beta2 or v1alpha3): "
    )
    assert "Kubernetes 1.37 serves v1 by default" in DEVICE_TAINT_RULES_UNSERVED
    assert "--runtime-config=resource.k8s.io/v1beta2=true" in DEVICE_TAINT_RULES_UNSERVED
    assert "--runtime-config=resource.k8s.io/v1alpha3=true" in DEVICE_TAINT_RULES_UNSERVED
    assert "DRADeviceTaintRules feature gate" in DEVICE_TAINT_RULES_UNSERVED
    assert not DEVICE_TAINT_RULES_UNSERVED.endswith(".")


SERVED = {
    "/apis/resource.k8s.io/v1": {"resources": [{"name": "resourceslices"}, {"name": "deviceclasses"}]},
    "/apis/dra-operators.io/v1alpha1": {
        "resources": [{"name": "devicetaintselectors"}, {"name": "devicetaintselectors/status"}]
    },
}


def make_runtime(client: ServingClient) -> Runtime:
    """The runtime that discovers what ``client`` serves of the definition's kinds, with its controller."""
    runtime = unit_runtime(
        client,
        "taintselector",
        Settings(),
        kinds=DEFINITION.kinds,
        field_manager="dra-operators-taintselector",
        events=False,
    )
    runtime.controller = TaintSelectorController(runtime)
    return runtime


def selector_body() -> dict[str, Any]:
    return {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "DeviceTaintSelector",
        "metadata": {"name": "broken-gpu", "uid": "U", "generation": 1},
        "spec": {
            "taint": {"key": "dra.example.com/unhealthy", "effect": "NoExecute"},
            "deviceSelector": {"driver": GPU},
        },
    }


def slice_body() -> dict[str, Any]:
    return {
        "metadata": {"name": "s"},
        "spec": {
            "driver": GPU,
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
        },
    }


async def test_without_a_rule_api_each_selector_says_why_and_the_operator_stays_ready(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = ServingClient({**SERVED})
    runtime = make_runtime(client)
    controller: TaintSelectorController = runtime.controller
    with caplog.at_level(logging.WARNING, logger="operators.taintselector.controller"):
        assert await runtime.prepare(), "the rules are not required"
    assert any(DEVICE_TAINT_RULES_UNSERVED in r.getMessage() for r in caplog.records)
    assert controller.rules_api is None

    controller.upsert_slice(slice_body())
    controller.upsert_selector(selector_body())
    await controller.sync(Key(SELECTOR, "", "broken-gpu"))

    [(verb, path, body)] = client.calls
    assert verb == "patch"
    assert path == "/apis/dra-operators.io/v1alpha1/devicetaintselectors/broken-gpu/status"
    [ready] = [c for c in body["status"]["conditions"] if c["type"] == READY]
    assert (ready["status"], ready["reason"]) == ("False", REASON_DEVICE_TAINT_RULE_UNAVAILABLE)
    assert ready["message"] == f"The 2 devices selected cannot be tainted: {DEVICE_TAINT_RULES_UNSERVED}."
    assert body["status"]["selectedDevices"] == 2


async def test_without_the_selector_crd_the_runtime_says_so_and_prepare_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = ServingClient({**SERVED})
    del client.discovery["/apis/dra-operators.io/v1alpha1"]
    runtime = make_runtime(client)
    assert not await runtime.prepare()
    assert "required APIs are not served: devicetaintselectors in dra-operators.io/v1alpha1;" in caplog.text
    assert DEVICE_TAINT_RULES_UNSERVED not in caplog.text, "prepare() is not called"


# -- kubectl dra taint, taint-preview and drain: the same text, before anything is created -------


class NoRuleApiSession:
    """A session on a cluster that serves the DeviceTaintSelector CRD and slices, but no rules."""

    def __init__(self) -> None:
        self.created: list[str] = []

    async def first_served(
        self, group: str, plural: str, versions: Sequence[str], subresource: str = "status"
    ) -> ServedResource | None:
        if plural == "devicetaintselectors":
            return ServedResource("dra-operators.io", "v1alpha1", plural, namespaced=False)
        return None

    async def items(self, doing: str, path: str, **params: str) -> list[dict[str, Any]]:
        return [{"spec": {"driver": GPU, "pool": {"name": "node-1"}}}]

    def temporary(self, what: str, collection: str, body: dict[str, Any]) -> Any:
        self.created.append(collection)
        raise AssertionError("nothing may be created")


def _taint_order(target: model.Target) -> commands.TaintOrder:
    return commands.TaintOrder(
        target=target,
        name="n",
        key="k",
        value="",
        effect="NoExecute",
        timeout=5.0,
        namespace=None,
        yes=True,
        dry_run=False,
        wait=False,
    )


@pytest.mark.parametrize(
    "target",
    [
        model.make_target(DeviceTaintSelector(driver=GPU, pool="node-1"), None, ()),
        model.make_target(DeviceTaintSelector(), "gpu", ()),
    ],
    ids=["by-driver-and-pool", "by-class"],
)
async def test_kubectl_dra_taint_says_why_it_can_do_nothing(target: model.Target) -> None:
    session = NoRuleApiSession()
    console = Console(False, stdin=io.StringIO(), out=io.StringIO())
    with pytest.raises(PluginError) as refused:
        await commands.taint(cast(Session, session), _taint_order(target), console)
    assert str(refused.value) == DEVICE_TAINT_RULES_UNSERVED
    assert session.created == []


async def test_kubectl_dra_drain_says_why_it_can_do_nothing() -> None:
    session = NoRuleApiSession()
    order = commands.DrainOrder(
        kind="node",
        subject="node-1",
        name=None,
        key="k",
        value="",
        grace=0.0,
        timeout=5.0,
        ignore_tolerating=False,
        namespace=None,
        yes=True,
        dry_run=False,
    )
    console = Console(False, stdin=io.StringIO(), out=io.StringIO())
    with pytest.raises(PluginError) as refused:
        await commands.drain(cast(Session, session), order, console)
    assert str(refused.value) == DEVICE_TAINT_RULES_UNSERVED
    assert session.created == []


class SelectorsOnlySession(NoRuleApiSession):
    """No rule API; one DeviceTaintSelector that kubectl dra made."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []

    async def items(self, doing: str, path: str, **params: str) -> list[dict[str, Any]]:
        self.listed.append(path)
        return [
            {
                "metadata": {
                    "name": "maintenance",
                    "uid": "u-1",
                    "labels": {model.CREATED_BY_LABEL: model.CREATED_BY, model.NAME_LABEL: "maintenance"},
                },
                "spec": {
                    "deviceSelector": {"deviceClassName": "gpu"},
                    "taint": {"key": "k", "effect": "NoSchedule"},
                },
            }
        ]


async def test_untaint_finds_the_selectors_of_a_cluster_without_the_rule_api() -> None:
    session = SelectorsOnlySession()
    found = await maintain.ours_matching(cast(Session, session), model.Filter(name="maintenance"))
    assert [(r.kind, r.name, r.uid) for r in found] == [(model.SELECTOR_KIND, "maintenance", "u-1")]
    assert session.listed == ["/apis/dra-operators.io/v1alpha1/devicetaintselectors"]


async def test_untaint_without_either_api_says_why() -> None:
    class Nothing(NoRuleApiSession):
        async def first_served(
            self, group: str, plural: str, versions: Sequence[str], subresource: str = "status"
        ) -> ServedResource | None:
            return None

    with pytest.raises(PluginError) as refused:
        await maintain.ours_matching(cast(Session, Nothing()), model.Filter())
    assert str(refused.value) == DEVICE_TAINT_RULES_UNSERVED
