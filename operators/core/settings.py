"""Typed process settings: one pydantic model per operator, exposed as flags and env vars.

Every field ``some_option`` is the flag ``--some-option`` and the environment variable
``DRA_OPERATORS_SOME_OPTION``; a flag wins over the variable, the variable over the default.
The field's description is its ``--help`` text and says why the default was chosen.
Operators subclass :class:`OperatorSettings` to add their own options.
"""

from __future__ import annotations

import argparse
import os
import socket
import uuid
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .names import is_dns_label

ENV_PREFIX = "DRA_OPERATORS_"

SurfaceMode = Literal["auto", "on", "off"]
"""Whether an operator uses an optional API: auto = when discovery serves it; on = required;
off = never."""


class ConfigurationError(Exception):
    """A setting the user has to fix (flags, credentials, bind addresses). The message is one
    line, printed as ``dra-operators: error: <message>`` with exit code 2, never a traceback."""


def one_line(value: object) -> str:
    """Library messages span lines (YAML marks, pydantic's layout); a configuration error must not."""
    return " ".join(str(value).split())


class OperatorSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)

    kubeconfig: str | None = Field(
        None,
        description="Path of a kubeconfig. Unset: $KUBECONFIG, else the in-cluster service account "
        "(a Pod's), else ~/.kube/config.",
    )
    namespace: str = Field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "dra-operators"),
        description="The operator's own namespace (the leader-election Lease; the bindingattacher's "
        "ledger and Secrets); defaults to $POD_NAMESPACE, where the Deployment runs, else dra-operators.",
    )
    leader_elect: bool = Field(
        False,
        description="Hold a coordination.k8s.io Lease and act only while holding it (for >1 replica).",
    )
    leader_elect_lease_duration: float = Field(
        15.0,
        gt=0,
        description="Seconds a Lease stays valid without renewal (kube-controller-manager's default).",
    )
    leader_elect_renew_deadline: float = Field(
        10.0, gt=0, description="Seconds the leader keeps trying to renew before it gives up and exits."
    )
    leader_elect_retry_period: float = Field(
        2.0, gt=0, description="Seconds between attempts to acquire or renew the Lease."
    )
    identity: str = Field(
        default_factory=lambda: (
            os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        ),
        description="This replica's name in the Lease and in Events; defaults to $POD_NAME, else the host "
        "name plus a random suffix (two processes on one host must not share a Lease identity).",
    )
    metrics_bind_address: str = Field(
        ":8080",
        description="host:port of the Prometheus /metrics endpoint; no host: every address, IPv4 and IPv6.",
    )
    health_probe_bind_address: str = Field(
        ":8081",
        description="host:port of /healthz and /readyz (may equal the metrics address); no host: every "
        "address, IPv4 and IPv6.",
    )
    metrics_secure: bool = Field(
        True,
        description="Serve /metrics over HTTPS to clients whose token a TokenReview accepts and a "
        "SubjectAccessReview allows to get /metrics (ClusterRole dra-operators-metrics-reader); false: "
        "plain HTTP for anyone who reaches the port. Needs a metrics address of its own.",
    )
    metrics_cert_dir: str | None = Field(
        None,
        description="Directory with tls.crt and tls.key for /metrics (e.g. a cert-manager Secret); unset: a "
        "self-signed certificate made at start.",
    )
    workers: int = Field(0, ge=0, description="Concurrent syncs; 0 means the operator's upstream default.")
    kube_api_qps: float = Field(
        20.0,
        description="Client-side API requests per second (as kube-controller-manager); <= 0: no limit.",
    )
    kube_api_burst: int = Field(
        30, ge=1, description="Client-side request burst (kube-controller-manager's default)."
    )
    api_unreachable_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds without any answer from kube-apiserver before /readyz fails (/healthz never "
        "does for that: a restart cannot bring the API server back).",
    )
    shutdown_grace_period: float = Field(
        20.0,
        ge=0,
        description="Seconds running syncs get to finish after SIGTERM (fits a 30 s Pod grace period).",
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="text for humans, json for log collectors."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Lowest level logged."
    )

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        # An RFC 1123 label, as kube-apiserver validates namespace names.
        if not is_dns_label(value):
            raise ValueError(f"{value!r} is not a namespace name (lower-case letters, digits and '-')")
        return value

    @field_validator("metrics_bind_address", "health_probe_bind_address")
    @classmethod
    def _address(cls, value: str) -> str:
        _host, colon, port = value.rpartition(":")
        if not colon or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"{value!r} is not host:port (e.g. :8080, 127.0.0.1:8080 or [::1]:8080)")
        return value

    @model_validator(mode="after")
    def _secure_metrics_listen_alone(self) -> OperatorSettings:
        # The kubelet's probes carry no token: they cannot share the authenticated listener.
        if self.metrics_secure and self.metrics_bind_address == self.health_probe_bind_address:
            raise ValueError(
                "with --metrics-secure, --metrics-bind-address needs an address of its own, not the "
                "--health-probe-bind-address; or pass --metrics-secure=false"
            )
        return self


class InTreeReplacementSettings(OperatorSettings):
    """Settings of an operator that replaces one of kube-controller-manager's controllers."""

    allow_in_tree_controller: bool = Field(
        False,
        description="Act even when kube-controller-manager's own controller for the same objects is "
        "seen acting (for a migration; both then write the same objects). By default the operator "
        "stops writing and turns not ready when it sees that (docs/install.md, The coexistence guard).",
    )


def bool_value(text: str) -> bool:
    """A boolean flag's explicit value, spelled as Go's strconv.ParseBool accepts it."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true or false)")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _env(name: str) -> str:
    return ENV_PREFIX + name.upper()


def add_arguments(parser: argparse.ArgumentParser, model: type[OperatorSettings]) -> None:
    for name, info in model.model_fields.items():
        annotation = info.annotation
        help_text = f"{info.description} [env {_env(name)}]"
        default = None if info.default_factory is not None else info.default
        if default is not None:
            help_text += f" (default: {default})"
        if annotation is bool:
            # As Kubernetes components take them (--leader-elect=false), and --no-<flag>.
            parser.add_argument(
                _flag(name),
                dest=name,
                nargs="?",
                const=True,
                type=bool_value,
                default=None,
                metavar="true|false",
                help=help_text,
            )
            parser.add_argument(
                "--no-" + _flag(name)[2:],
                dest=name,
                action="store_false",
                default=None,
                help=argparse.SUPPRESS,
            )
            continue
        choices = get_args(annotation) if get_origin(annotation) is Literal else None
        parser.add_argument(_flag(name), dest=name, default=None, choices=choices, help=help_text)


def _collect(
    model: type[OperatorSettings], namespace: argparse.Namespace, environ: dict[str, str] | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The given values, and for each where it came from (``--flag=value`` or ``ENV=value``)."""
    environ = dict(os.environ if environ is None else environ)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in model.model_fields:
        flag_value = getattr(namespace, name, None)
        if flag_value is not None:
            values[name] = flag_value
            sources[name] = f"{_flag(name)}={flag_value}"
        elif _env(name) in environ:
            raw = environ[_env(name)]
            values[name] = (
                raw.lower() in ("1", "true", "yes", "on")
                if model.model_fields[name].annotation is bool
                else raw
            )
            sources[name] = f"{_env(name)}={raw}"
    return values, sources


def from_arguments(
    model: type[OperatorSettings], namespace: argparse.Namespace, environ: dict[str, str] | None = None
) -> OperatorSettings:
    values, _sources = _collect(model, namespace, environ)
    return model.model_validate(values)


def load(
    model: type[OperatorSettings], namespace: argparse.Namespace, environ: dict[str, str] | None = None
) -> OperatorSettings:
    """:func:`from_arguments` for the command line: invalid values are one :class:`ConfigurationError`
    naming the flag or variable that carried each."""
    values, sources = _collect(model, namespace, environ)
    try:
        return model.model_validate(values)
    except ValidationError as err:
        raise ConfigurationError(describe_invalid(err, sources)) from None


def describe_invalid(err: ValidationError, sources: dict[str, str]) -> str:
    problems = []
    for error in err.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        where = sources.get(field) or (_flag(field) if field else "settings")
        message = str(error["msg"]).removeprefix("Value error, ")
        problems.append(f"{where}: {message}")
    return one_line("; ".join(problems))


def markdown_table(model: type[OperatorSettings], only_own: bool = False) -> str:
    """The options of ``model`` as a Markdown table (docs/reference.md; a test keeps it current)."""
    rows = ["| flag | environment variable | default | meaning |", "|---|---|---|---|"]
    inherited = set(OperatorSettings.model_fields) if only_own else set()
    for name, info in model.model_fields.items():
        if name in inherited:
            continue
        if info.default_factory is not None:
            default = "(computed)"
        elif info.default is None:
            default = "unset"
        else:
            default = f"`{info.default}`"
        description = (info.description or "").replace("|", "\\|")
        rows.append(f"| `{_flag(name)}` | `{_env(name)}` | {default} | {description} |")
    return "\n".join(rows)
