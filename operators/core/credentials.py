"""Where the Kubernetes credentials come from, found as the Kubernetes tools find them.

:func:`locate_credentials` is the one resolution order of the project, for the operators and for
``kubectl dra`` alike. It is controller-runtime's (``ctrl.GetConfig``), the order operators written
against client-go use, because an operator started from a shell must honour ``$KUBECONFIG`` like
kubectl does, and one started in a Pod must use its service account even when the image happens
to carry a ``~/.kube/config``:

1. ``--kubeconfig``: a file the user named must exist;
2. ``$KUBECONFIG``: a list (``a:b``) merged as kubectl merges it; missing files are skipped, as
   kubectl skips them, but a list naming no existing file is an error rather than a silent
   fall-through to other credentials the user did not mean;
3. the in-cluster service account, when ``KUBERNETES_SERVICE_HOST``/``_PORT`` are set and the
   token file exists (client-go's ``inClusterClientConfig.Possible``); skipped when a kubeconfig
   context was asked for, since a service account has none;
4. ``~/.kube/config``.

kubernetes-asyncio merges a kubeconfig list itself, but its merge lets the *last* file's
``current-context`` win where kubectl keeps the *first* one's; :func:`choose_context` picks the
context by kubectl's rule and names it to the loader explicitly. It also turns the loader's
errors for the usual mistakes (a missing or misnamed context, a context without its cluster,
malformed YAML) into one sentence each: every failure here is a
:class:`~operators.core.settings.ConfigurationError` whose message fits one line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from .settings import ConfigurationError, one_line

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_ENV = "KUBERNETES_SERVICE_HOST"
PORT_ENV = "KUBERNETES_SERVICE_PORT"
NO_CREDENTIALS = (
    "no Kubernetes credentials: pass --kubeconfig, set KUBECONFIG, run in a pod, or create ~/.kube/config"
)


@dataclass(frozen=True)
class Credentials:
    """The source :func:`locate_credentials` chose: kubeconfig files (in merge order), or the
    in-cluster service account at ``host:port`` (an empty ``kubeconfig``)."""

    origin: str
    kubeconfig: tuple[str, ...] = ()
    host: str = ""
    port: str = ""
    service_account: Path = SERVICE_ACCOUNT_DIR

    @property
    def in_cluster(self) -> bool:
        return not self.kubeconfig

    @property
    def where(self) -> str:
        return os.pathsep.join(self.kubeconfig)

    def describe(self) -> str:
        if self.in_cluster:
            return f"the in-cluster service account ({self.service_account})"
        return f"kubeconfig {self.where} (from {self.origin})"


def _existing(listed: str) -> list[str]:
    paths = [str(Path(p).expanduser()) for p in listed.split(os.pathsep) if p]
    return [p for p in paths if Path(p).is_file()]


def locate_credentials(
    explicit: str | None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    service_account: Path = SERVICE_ACCOUNT_DIR,
    in_cluster: bool = True,
) -> Credentials:
    """The credentials to use, in the order of the module docstring.

    ``explicit`` may itself be a list (``a:b``): the project's tools pass on a resolved
    ``$KUBECONFIG`` that way. ``in_cluster=False`` serves callers that need a kubeconfig file.
    """
    env = os.environ if environ is None else environ
    if explicit:
        paths = [str(Path(p).expanduser()) for p in explicit.split(os.pathsep) if p]
        missing = [p for p in paths if not Path(p).is_file()]
        if missing or not paths:
            raise ConfigurationError(f"--kubeconfig {explicit}: no such file")
        return Credentials("--kubeconfig", tuple(paths))
    listed = env.get("KUBECONFIG", "")
    if listed:
        present = _existing(listed)
        if not present:
            raise ConfigurationError(f"$KUBECONFIG names no existing file: {listed}")
        return Credentials("$KUBECONFIG", tuple(present))
    host, port = env.get(HOST_ENV, ""), env.get(PORT_ENV, "")
    if in_cluster and not context and host and port and (service_account / "token").is_file():
        return Credentials("in-cluster", host=host, port=port, service_account=service_account)
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return Credentials("~/.kube/config", (str(default),))
    if not in_cluster:
        raise ConfigurationError(
            "no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or create ~/.kube/config"
        )
    raise ConfigurationError(NO_CREDENTIALS)


# -- kubeconfig contents --------------------------------------------------------------------------


def read_kubeconfigs(paths: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every file parsed, empty ones left out (kubectl reads an empty file as an empty config;
    kubernetes-asyncio's merge would fail on it)."""
    documents: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        try:
            text = Path(path).read_text()
        except OSError as err:
            raise ConfigurationError(f"cannot read kubeconfig {path}: {err.strerror or err}") from err
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(err, "problem", None) or err
            raise ConfigurationError(f"kubeconfig {path} is not valid YAML{at}: {one_line(problem)}") from err
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ConfigurationError(f"kubeconfig {path} is not a kubeconfig (not a YAML mapping)")
        documents.append((path, document))
    return documents


def _named(documents: Sequence[tuple[str, dict[str, Any]]], section: str) -> dict[str, Any]:
    """Entries by name, the first file's winning (kubectl's merge rule)."""
    found: dict[str, Any] = {}
    for path, document in documents:
        entries = document.get(section) or []
        if not isinstance(entries, list):
            raise ConfigurationError(f"kubeconfig {path}: {section} is not a list")
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                found.setdefault(entry["name"], entry.get(section.removesuffix("s")))
    return found


def choose_context(documents: Sequence[tuple[str, dict[str, Any]]], requested: str | None, where: str) -> str:
    """The context to use: the requested one, else the first file's ``current-context``; it must
    exist and name a cluster that exists."""
    if not documents:
        raise ConfigurationError(f"kubeconfig {where} is empty")
    contexts = _named(documents, "contexts")
    current = next((str(d["current-context"]) for _, d in documents if d.get("current-context")), "")
    name = requested or current
    if not name:
        raise ConfigurationError(
            f"kubeconfig {where} sets no current-context; choose one with kubectl config use-context"
        )
    if name not in contexts:
        given = "given by --context" if requested else "its current-context"
        known = ", ".join(sorted(contexts)) or "none"
        raise ConfigurationError(
            f'kubeconfig {where} has no context "{name}" ({given}); its contexts: {known}'
        )
    details = contexts[name]
    cluster = details.get("cluster") if isinstance(details, dict) else None
    if not cluster:
        raise ConfigurationError(f'kubeconfig {where}: context "{name}" names no cluster')
    if cluster not in _named(documents, "clusters"):
        raise ConfigurationError(
            f'kubeconfig {where}: context "{name}" names cluster "{cluster}", which it does not define'
        )
    return name


def default_namespace(credentials: Credentials, context: str | None = None) -> str:
    """The namespace kubectl would use without ``-n``: the context's, the service account's in a pod,
    else ``default``."""
    if credentials.in_cluster:
        try:
            return (credentials.service_account / "namespace").read_text().strip() or "default"
        except OSError:
            return "default"
    documents = read_kubeconfigs(credentials.kubeconfig)
    chosen = choose_context(documents, context, credentials.where)
    details = _named(documents, "contexts").get(chosen)
    namespace = details.get("namespace") if isinstance(details, dict) else None
    return str(namespace) if namespace else "default"


# -- loading --------------------------------------------------------------------------------------


async def load_credentials(
    credentials: Credentials, configuration: k8s_client.Configuration, context: str | None = None
) -> None:
    """Fill ``configuration`` from ``credentials``; every failure is a :class:`ConfigurationError`."""
    if credentials.in_cluster:
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration,
                environ={HOST_ENV: credentials.host, PORT_ENV: credentials.port},
                token_filename=str(credentials.service_account / "token"),
                cert_filename=str(credentials.service_account / "ca.crt"),
            )
        except Exception as err:  # ConfigException or OSError: the service account is unusable
            raise ConfigurationError(f"cannot use {credentials.describe()}: {one_line(err)}") from err
        log.info("credentials: %s", credentials.describe())
        return
    documents = read_kubeconfigs(credentials.kubeconfig)
    chosen = choose_context(documents, context, credentials.where)
    try:
        await k8s_config.load_kube_config(
            config_file=os.pathsep.join(path for path, _ in documents),
            context=chosen,
            client_configuration=configuration,
            persist_config=False,
        )
    except Exception as err:  # the loader raises many types (ConfigException, KeyError, ...) for one cause
        detail = one_line(err) or type(err).__name__
        raise ConfigurationError(f"cannot use kubeconfig {credentials.where}: {detail}") from err
    log.info("credentials: %s, context %s", credentials.describe(), chosen)
