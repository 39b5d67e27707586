"""Credentials found where kubectl and client-go find them, and every unusable source reported as
one sentence: ``--kubeconfig``, ``$KUBECONFIG`` (a merged list), the in-cluster service account,
``~/.kube/config``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client as k8s_client

from operators.core.credentials import (
    NO_CREDENTIALS,
    Credentials,
    choose_context,
    default_namespace,
    load_credentials,
    locate_credentials,
)
from operators.core.settings import ConfigurationError
from operators.kubectl_dra import kubeconfig


def kubeconfig_text(
    server: str = "https://a.example:6443",
    *,
    context: str = "a",
    current: str | None = "a",
    cluster: str = "a",
    defines_cluster: bool = True,
    ca: str | None = None,
) -> str:
    fields = {"server": server, **({"certificate-authority": ca} if ca else {})}
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": fields}] if defines_cluster else [],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": "u"}}],
    }
    if current is not None:
        document["current-context"] = current
    return yaml.safe_dump(document)


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


@pytest.fixture
def service_account(tmp_path: Path) -> Path:
    directory = tmp_path / "serviceaccount"
    write(directory / "token", "sa-token")
    write(directory / "ca.crt", "not checked until a request is made")
    return directory


IN_CLUSTER_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def test_resolution_order(tmp_path: Path, service_account: Path) -> None:
    flag = write(tmp_path / "flag", "x")
    listed = write(tmp_path / "listed", "x")
    home = tmp_path / "home"
    default = write(home / ".kube" / "config", "x")
    everything = {"KUBECONFIG": listed, **IN_CLUSTER_ENV}

    def found(explicit: str | None, environ: dict[str, str]) -> tuple[str, tuple[str, ...]]:
        chosen = locate_credentials(explicit, environ=environ, home=home, service_account=service_account)
        return chosen.origin, chosen.kubeconfig

    assert found(flag, everything) == ("--kubeconfig", (flag,))
    assert found(None, everything) == ("$KUBECONFIG", (listed,))
    assert found(None, IN_CLUSTER_ENV) == ("in-cluster", ())
    assert found(None, {}) == ("~/.kube/config", (default,))


def test_kubeconfig_lists_keep_their_existing_files_in_order(tmp_path: Path) -> None:
    a, b = write(tmp_path / "a", "x"), write(tmp_path / "b", "x")
    listed = os.pathsep.join([str(tmp_path / "missing"), a, "", b])
    chosen = locate_credentials(None, environ={"KUBECONFIG": listed}, home=tmp_path)
    assert chosen.kubeconfig == (a, b)
    assert chosen.where == f"{a}{os.pathsep}{b}"


def test_in_cluster_needs_the_variables_and_the_token(tmp_path: Path, service_account: Path) -> None:
    home = tmp_path / "home"
    default = write(home / ".kube" / "config", "x")
    only_host = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    no_token = tmp_path / "empty-serviceaccount"
    for environ, directory in [(only_host, service_account), (IN_CLUSTER_ENV, no_token)]:
        chosen = locate_credentials(None, environ=environ, home=home, service_account=directory)
        assert chosen.kubeconfig == (default,)
    # A service account has no contexts: asking for one means a kubeconfig.
    chosen = locate_credentials(
        None, context="a", environ=IN_CLUSTER_ENV, home=home, service_account=service_account
    )
    assert chosen.kubeconfig == (default,)


@pytest.mark.parametrize(
    ("explicit", "environ", "message"),
    [
        ("{tmp}/missing", {}, "--kubeconfig {tmp}/missing: no such file"),
        (None, {"KUBECONFIG": "{tmp}/missing"}, "$KUBECONFIG names no existing file: {tmp}/missing"),
        (None, {}, NO_CREDENTIALS),
    ],
)
def test_no_usable_source(
    tmp_path: Path, explicit: str | None, environ: dict[str, str], message: str
) -> None:
    explicit = explicit.format(tmp=tmp_path) if explicit else None
    environ = {k: v.format(tmp=tmp_path) for k, v in environ.items()}
    with pytest.raises(ConfigurationError) as raised:
        locate_credentials(explicit, environ=environ, home=tmp_path, service_account=tmp_path)
    assert str(raised.value) == message.format(tmp=tmp_path)


def test_the_first_files_current_context_wins(tmp_path: Path) -> None:
    """kubectl keeps the first file's current-context; kubernetes-asyncio's own merge the last one's."""
    first = {"current-context": "a", "contexts": [{"name": "a", "context": {"cluster": "a"}}]}
    second = {
        "current-context": "b",
        "contexts": [{"name": "b", "context": {"cluster": "b"}}, {"name": "a", "context": {"cluster": "b"}}],
        "clusters": [{"name": "a", "cluster": {}}, {"name": "b", "cluster": {}}],
    }
    assert choose_context([("1", first), ("2", second)], None, "1:2") == "a"
    assert choose_context([("1", first), ("2", second)], "b", "1:2") == "b"


async def test_a_merged_list_connects_to_the_first_files_context(tmp_path: Path) -> None:
    a = write(tmp_path / "a", kubeconfig_text("https://a.example:6443", context="a", current="a"))
    b = write(
        tmp_path / "b", kubeconfig_text("https://b.example:6443", context="b", current="b", cluster="b")
    )
    configuration = k8s_client.Configuration()
    chosen = locate_credentials(None, environ={"KUBECONFIG": f"{a}{os.pathsep}{b}"}, home=tmp_path)
    await load_credentials(chosen, configuration)
    assert configuration.host == "https://a.example:6443"
    await load_credentials(chosen, configuration, context="b")
    assert configuration.host == "https://b.example:6443"


async def test_in_cluster_credentials_load(service_account: Path, tmp_path: Path) -> None:
    chosen = locate_credentials(None, environ=IN_CLUSTER_ENV, home=tmp_path, service_account=service_account)
    configuration = k8s_client.Configuration()
    await load_credentials(chosen, configuration)
    assert configuration.host == "https://10.96.0.1:443"
    assert configuration.api_key["BearerToken"] == "Bearer sa-token"


@pytest.mark.parametrize(
    ("text", "context", "message"),
    [
        ("clusters: [\n", None, "kubeconfig {path} is not valid YAML at line 2, column 1: expected "),
        ("just a string\n", None, "kubeconfig {path} is not a kubeconfig (not a YAML mapping)"),
        ("", None, "kubeconfig {path} is empty"),
        (kubeconfig_text(current=None), None, "kubeconfig {path} sets no current-context"),
        (
            kubeconfig_text(current="gone"),
            None,
            'kubeconfig {path} has no context "gone" (its current-context); its contexts: a',
        ),
        (kubeconfig_text(), "other", 'kubeconfig {path} has no context "other" (given by --context)'),
        (
            kubeconfig_text(defines_cluster=False),
            None,
            'kubeconfig {path}: context "a" names cluster "a", which it does not define',
        ),
        (
            kubeconfig_text(ca="/nope/ca.crt"),
            None,
            "cannot use kubeconfig {path}: File does not exists: /nope/ca.crt",
        ),
    ],
    ids=[
        "malformed",
        "not-a-mapping",
        "empty",
        "no-current-context",
        "missing-context",
        "unknown-context",
        "missing-cluster",
        "loader-error",
    ],
)
async def test_unusable_kubeconfigs_are_one_sentence(
    tmp_path: Path, text: str, context: str | None, message: str
) -> None:
    path = write(tmp_path / "config", text)
    chosen = locate_credentials(path, environ={}, home=tmp_path)
    with pytest.raises(ConfigurationError) as raised:
        await load_credentials(chosen, k8s_client.Configuration(), context)
    error = str(raised.value)
    assert error.startswith(message.format(path=path))
    assert "\n" not in error


async def test_an_unreadable_kubeconfig(tmp_path: Path) -> None:
    directory = tmp_path / "config"
    directory.mkdir()
    with pytest.raises(ConfigurationError, match="no such file"):
        locate_credentials(str(directory), environ={}, home=tmp_path)
    # Permissions do not stop root (the tests' usual user): a file gone after the lookup does.
    path = write(tmp_path / "gone", kubeconfig_text())
    chosen = locate_credentials(path, environ={}, home=tmp_path)
    await asyncio.to_thread(Path(path).unlink)
    with pytest.raises(ConfigurationError) as raised:
        await load_credentials(chosen, k8s_client.Configuration())
    assert str(raised.value) == f"cannot read kubeconfig {path}: No such file or directory"


def test_the_file_lookup_of_user_tools_leaves_the_service_account_out(tmp_path: Path) -> None:
    """``kubectl_dra.kubeconfig.resolve`` (the demo's fake driver needs a file) is the same order."""
    a, b = write(tmp_path / "a", "x"), write(tmp_path / "b", "x")
    home = tmp_path / "home"
    assert kubeconfig.resolve(a, {"KUBECONFIG": b}, home) == a
    assert kubeconfig.resolve(None, {"KUBECONFIG": f"{tmp_path / 'missing'}:{a}:{b}"}, home) == f"{a}:{b}"
    with pytest.raises(kubeconfig.NoKubeconfig, match="no kubeconfig: pass --kubeconfig"):
        kubeconfig.resolve(None, IN_CLUSTER_ENV, home)
    default = write(home / ".kube" / "config", "x")
    assert kubeconfig.resolve(None, {}, home) == default


def test_the_default_namespace_is_the_contexts_as_kubectl_reads_it(
    tmp_path: Path, service_account: Path
) -> None:
    document = yaml.safe_load(kubeconfig_text())
    document["contexts"].append({"name": "ml", "context": {"cluster": "a", "user": "u", "namespace": "ml"}})
    path = write(tmp_path / "config", yaml.safe_dump(document))
    chosen = Credentials("--kubeconfig", (path,))
    assert default_namespace(chosen) == "default", "a context without a namespace"
    assert default_namespace(chosen, "ml") == "ml"
    pod = Credentials("in-cluster", host="10.96.0.1", port="443", service_account=service_account)
    assert default_namespace(pod) == "default", "no namespace file"
    write(service_account / "namespace", "dra-operators\n")
    assert default_namespace(pod) == "dra-operators"
