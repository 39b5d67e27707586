"""``kubectl dra`` as scripts see it: exit codes, error messages, kubeconfig lookup, and the
temporary objects always deleted. The API is a fake client (no cluster), except for one
connection refused by a closed local port."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubeconfigs import empty_kubeconfig

from operators.core.client import ApiError
from operators.dra.durations import duration_seconds
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED
from operators.kubectl_dra import cli
from operators.kubectl_dra.session import Session

CRD = "/apis/dra-operators.io/v1alpha1"
RULES = "/apis/resource.k8s.io/v1"


class FakeClient:
    """Discovery, create, get and delete over a dict; ``answer`` is what an operator would write."""

    server = "https://fake.invalid"

    def __init__(self, groups: dict[str, list[str]], answer: dict[str, Any] | None = None) -> None:
        self.groups = groups
        self.answer = answer
        self.objects: dict[str, dict[str, Any]] = {}
        self.deleted: list[tuple[str, str | None]] = []

    async def get(self, path: str, **params: str) -> Any:
        if path in self.groups:
            return {
                "resources": [{"name": name, "kind": "X", "namespaced": False} for name in self.groups[path]]
            }
        if path in self.objects:
            return self.objects[path]
        if path.endswith("/resourceslices"):
            return {"items": [{"spec": {"driver": "gpu.example.com"}}], "metadata": {}}
        raise ApiError(404, "NotFound", f"{path} not found")

    async def create(self, path: str, body: dict[str, Any], **params: str) -> Any:
        name = body["metadata"]["generateName"] + "x1y2z"
        obj = {**body, "metadata": {**body["metadata"], "name": name, "uid": "uid-1", "generation": 1}}
        if self.answer is not None:
            obj["status"] = self.answer
        self.objects[f"{path}/{name}"] = obj
        return obj

    async def delete(self, path: str, uid: str | None = None, **params: str) -> Any:
        self.deleted.append((path, uid))
        self.objects.pop(path, None)
        return {}

    async def close(self) -> None:
        pass


@pytest.fixture
def config(tmp_path: Path) -> str:
    return empty_kubeconfig(tmp_path)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> list[FakeClient]:
    """Every Session.connect returns a Session over the FakeClient the test puts in the list."""
    clients: list[FakeClient] = []

    async def connect(cls: type[Session], path: str, context: str | None) -> Session:
        return cls(clients[0])  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "connect", classmethod(connect))
    return clients


POOLS = {CRD: ["resourcepoolstatusrequests", "resourcepoolstatusrequests/status"]}
COMPLETE = {"type": "Complete", "status": "True", "reason": "CalculationComplete", "message": "m"}


def test_no_answer_is_exit_3_and_the_request_is_deleted(
    fake: list[FakeClient], config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.append(FakeClient(POOLS))
    code = cli.main(["pools", "--driver", "gpu.example.com", "--timeout", "0.3s", "--kubeconfig", config])
    assert code == 3
    assert (
        capsys.readouterr().err
        == "error: no operator answered within 0.3s: is the poolstatus operator running?\n"
    )
    assert fake[0].deleted == [(f"{CRD}/resourcepoolstatusrequests/kubectl-dra-pools-x1y2z", "uid-1")]


def test_answer_for_every_published_driver(
    fake: list[FakeClient], config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.append(FakeClient(POOLS, {"poolCount": 0, "conditions": [COMPLETE]}))
    assert cli.main(["pools", "--kubeconfig", config, "-o", "yaml"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["apiVersion"] == "dra-operators.io/v1alpha1"
    assert [r["driver"] for r in doc["requests"]] == ["gpu.example.com"]
    assert len(fake[0].deleted) == 1


def test_failed_request_is_exit_1(
    fake: list[FakeClient], config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "CalculationFailed",
        "message": "Failed to list X",
    }
    fake.append(FakeClient(POOLS, {"poolCount": 0, "conditions": [failed]}))
    assert cli.main(["pools", "--driver", "d.example.com", "--kubeconfig", config]) == 1
    assert (
        "the pool status request for driver d.example.com failed: Failed to list X" in capsys.readouterr().err
    )
    assert len(fake[0].deleted) == 1


@pytest.mark.parametrize(
    ("api", "message"),
    [
        ("auto", "this cluster serves no ResourcePoolStatusRequest API"),
        ("builtin", "does not serve resourcepoolstatusrequests in resource.k8s.io/v1alpha3 (--api builtin)"),
    ],
)
def test_missing_api_is_exit_1(
    fake: list[FakeClient], config: str, capsys: pytest.CaptureFixture[str], api: str, message: str
) -> None:
    fake.append(FakeClient({}))
    assert cli.main(["pools", "--api", api, "--kubeconfig", config]) == 1
    assert message in capsys.readouterr().err


def test_preview_without_the_devicetaint_operator(
    fake: list[FakeClient], config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.append(FakeClient({RULES: ["devicetaintrules", "devicetaintrules/status"]}))
    code = cli.main(["taint-preview", "driver=gpu.example.com", "--timeout", "300ms", "--kubeconfig", config])
    assert code == 3
    assert "is the devicetaint operator running?" in capsys.readouterr().err
    ((path, uid),) = fake[0].deleted
    assert (path, uid) == (f"{RULES}/devicetaintrules/kubectl-dra-preview-x1y2z", "uid-1")


def test_preview_needs_a_rule_api(
    fake: list[FakeClient], config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # No status subresource, so no report possible; every version 1.35+ serves one with it.
    fake.append(FakeClient({RULES: ["devicetaintrules"]}))
    assert cli.main(["taint-preview", "gpu.example.com", "--kubeconfig", config]) == 1
    assert capsys.readouterr().err == f"error: {DEVICE_TAINT_RULES_UNSERVED}\n"


def test_unreachable_api_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The port is closed again when the test connects: the connection is refused.
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    assert cli.main(["pools", "--kubeconfig", str(path)]) == 1
    assert capsys.readouterr().err.startswith(
        f"error: cannot reach the API server at https://127.0.0.1:{port}"
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["taint-preview"],
        ["taint-preview", "colour=red"],
        ["pools", "--limit", "0"],
        ["pools", "--timeout", "soon"],
        ["pools", "-o", "wide"],
        ["taint-preview", "d", "--effect", "None"],
    ],
)
def test_usage_errors_are_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 2


def test_missing_credentials_are_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lookup is the operators' (tests/test_credentials.py); the plugin keeps its exit code 1."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli.main(["pools"]) == 1
    assert capsys.readouterr().err == (
        "error: no Kubernetes credentials: pass --kubeconfig, set KUBECONFIG, run in a pod, "
        "or create ~/.kube/config\n"
    )


def test_a_missing_context_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c"}}],
                "current-context": "x",
            }
        )
    )
    assert cli.main(["pools", "--kubeconfig", str(path), "--context", "y"]) == 1
    assert capsys.readouterr().err == (
        f'error: kubeconfig {path} has no context "y" (given by --context); its contexts: x\n'
    )


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("2", 2.0), ("1h", 3600.0)]
)
def test_durations(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1x", "s", "1m 30s", "-1s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        duration_seconds(text)


TAINTED_SLICE = {
    "metadata": {"name": "node-1-gpus"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "taints": [{"key": "health", "value": "bad", "effect": "None"}]}],
    },
}
PLAIN_RULE = {
    "metadata": {"name": "r"},
    "spec": {"deviceSelector": {"device": "gpu-0"}, "taint": {"key": "k", "effect": "NoSchedule"}},
}


class TaintedPoolClient(FakeClient):
    """One pool with a signalled device; listing DeviceTaintRules answers ``rules_status``."""

    def __init__(self, rules_status: int) -> None:
        pool = {"driver": "gpu.example.com", "poolName": "node-1", "generation": 1, "totalDevices": 1}
        super().__init__(
            {**POOLS, RULES: ["devicetaintrules"]},
            {"poolCount": 1, "pools": [pool], "conditions": [COMPLETE]},
        )
        self.rules_status = rules_status

    async def get(self, path: str, **params: str) -> Any:
        if path.endswith("/resourceslices"):
            return {"items": [TAINTED_SLICE], "metadata": {}}
        if path == f"{RULES}/devicetaintrules":
            if self.rules_status == 403:
                raise ApiError(403, "Forbidden", "cannot list devicetaintrules")
            return {"items": [PLAIN_RULE], "metadata": {}}
        return await super().get(path, **params)


def test_pools_show_the_taints_of_the_devices_and_do_without_unreadable_rules(
    fake: list[FakeClient], config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.append(TaintedPoolClient(200))
    assert cli.main(["pools", "--kubeconfig", config]) == 0
    out = capsys.readouterr().out
    assert "  gpu-0   health=bad  None (signal)  ResourceSlice node-1-gpus\n" in out
    assert "  gpu-0   k=          NoSchedule     DeviceTaintRule r\n" in out
    fake[0] = TaintedPoolClient(403)
    assert cli.main(["pools", "--kubeconfig", config]) == 0
    out = capsys.readouterr().out
    assert "  gpu-0   health=bad  None (signal)  ResourceSlice node-1-gpus\n" in out
    assert out.endswith(
        "DeviceTaintRules are not shown: forbidden while listing devicetaintrules: "
        "cannot list devicetaintrules.\n"
    )


@pytest.mark.parametrize("name", ["web-0/status", ".", "Web-0"])
def test_explain_refuses_a_name_no_object_can_have(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["explain", "pod", name])
    assert exited.value.code == 2
    assert f"{name!r} is not an object name" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["taint", "gpu.example.com", "--value", "Vendor:Timeout"], "is not a taint value"),
        (["taint-preview", "gpu.example.com", "--value", "a" * 64], "is not a taint value"),
        (["drain", "node", "node-1", "--value=x_"], "is not a taint value"),
        (["taint", "gpu.example.com", "--key", "a/b/c"], "is not a taint key"),
        (["taint-preview", "gpu.example.com", "--key", "/maintenance"], "is not a taint key"),
        (["untaint", "--key", "Upper.Example/x"], "is not a taint key"),
    ],
)
def test_a_taint_the_api_would_refuse_is_a_usage_error_before_anything_is_created(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
