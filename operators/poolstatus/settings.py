"""Options of the pool-status operator (spec section 16), on top of the shared ones.

Durations accept Go syntax (``500ms``, ``30s``, ``10m``, ``1h30m``) or a plain number of
seconds, and are held as float seconds. Every TTL and period is a setting so that the
end-to-end suite can run the TTL sweep and the grace period on a seconds scale.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from operators.core.settings import InTreeReplacementSettings, SurfaceMode
from operators.dra.durations import duration_seconds


class Settings(InTreeReplacementSettings):
    builtin_api: SurfaceMode = Field(
        "auto",
        description="Serve the built-in resource.k8s.io/v1alpha3 API: auto = when discovery lists it; "
        "on = required (exit 2 if absent); off = never (e.g. when the in-tree controller runs).",
    )
    crd_api: SurfaceMode = Field(
        "auto",
        description="Serve the project CRD dra-operators.io/v1alpha1: auto = when it is installed; "
        "on = required (exit 2 if absent); off = never.",
    )
    discovery_interval: float = Field(
        60.0,
        gt=0,
        description="Seconds (or a Go duration) between discovery re-checks; a change of a surface's "
        "availability restarts the process (exit 3). One minute keeps discovery traffic negligible.",
    )
    device_taint_rules: SurfaceMode = Field(
        "auto",
        description="Count devices tainted by DeviceTaintRules: auto = when resource.k8s.io serves "
        "them as v1, v1beta2 or v1alpha3 (the operator cannot read feature gates).",
    )
    incomplete_grace_period: float = Field(
        20.0,
        ge=0,
        description="How long a request waits for an incomplete pool before it completes anyway with "
        "PoolIncomplete (0 disables waiting). 20 s fits the documented `kubectl wait --timeout=30s`.",
    )
    completed_ttl: float = Field(
        3600.0, gt=0, description="A done request is deleted this long after its status was written (1h)."
    )
    pending_ttl: float = Field(
        86400.0, gt=0, description="A request still pending is deleted this long after creation (24h)."
    )
    cleanup_interval: float = Field(600.0, gt=0, description="Period of the TTL sweep (10m, as upstream).")
    max_status_bytes: int = Field(
        1_048_576,
        ge=1,
        description="Largest status (compact JSON) written; a bigger one becomes a Failed status, "
        "well below etcd's 1.5 MiB object limit.",
    )

    @field_validator(
        "discovery_interval",
        "incomplete_grace_period",
        "completed_ttl",
        "pending_ttl",
        "cleanup_interval",
        mode="before",
    )
    @classmethod
    def _duration(cls, value: Any) -> float:
        return duration_seconds(value)
