"""Process-wide options of the binding attacher (spec §22); per-driver options live in policies.

Every field is a flag (``--enable-test-actions``) and an environment variable
(``DRA_OPERATORS_ENABLE_TEST_ACTIONS``), as for every operator of the suite.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, field_validator

from operators.core.settings import OperatorSettings
from operators.dra.durations import parse_go_duration


class Settings(OperatorSettings):
    kube_api_qps: float = Field(
        50.0,
        description="Client-side API requests per second; claim status and ledger writes are on the "
        "scheduler's critical path, so the default is higher than kube-controller-manager's.",
    )
    kube_api_burst: int = Field(100, ge=1, description="Client-side request burst.")
    enable_test_actions: bool = Field(
        False,
        description="Allow policies with action.kind Test (a fake backend for acceptance and chaos "
        "tests); off so that a production cluster never reports fake attachments.",
    )
    exec_commands_dir: str = Field(
        "",
        description="The directory of the commands Exec actions may run (mount a ConfigMap there); a "
        "policy's command must resolve to a file in it. Unset: Exec actions are refused (Ready=False, "
        "ExecNotConfigured), since whoever creates a DeviceAttachPolicy would otherwise run code as "
        "the attacher.",
    )
    allow_insecure_webhooks: bool = Field(
        False,
        description="Let policies call webhooks over plain HTTP (with their allowInsecureHTTP) or with "
        "credentials in the URL; for test clusters only, since a policy author could send the bearer "
        "token in clear text.",
    )
    max_actions_per_policy: int = Field(
        50,
        ge=1,
        description="Action calls in flight for one policy, over its attaches and detaches: no policy "
        "takes every slot of --max-concurrent-actions from the others.",
    )
    binding_timeout: str | None = Field(
        None,
        description="kube-scheduler's DynamicResourcesArgs.bindingTimeout (a Go duration such as 30s). "
        "The attacher cannot read it from the API; when set, a policy's bindingTimeout is capped at it, "
        "so deadlines never end after the scheduler's. Unset: each policy's own value.",
    )
    max_concurrent_actions: int = Field(
        100, ge=1, description="Action calls in flight over all policies (each policy has its own limits)."
    )
    max_pod_events: int = Field(
        10, ge=0, description="Consumer pods that get outcome Events, per claim (Events are diagnostics)."
    )
    resync_period: str = Field(
        "5m",
        description="Period of the garbage-collection sweep and full re-reconcile of the ledger.",
    )

    @field_validator("binding_timeout", "resync_period")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and parse_go_duration(value) <= timedelta(0):
            raise ValueError(f"{value!r} must be a positive duration")
        return value

    @property
    def resync_seconds(self) -> float:
        return parse_go_duration(self.resync_period).total_seconds()

    @property
    def binding_timeout_cap(self) -> timedelta | None:
        return parse_go_duration(self.binding_timeout) if self.binding_timeout else None
