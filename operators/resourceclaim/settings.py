"""Options of the resourceclaim operator, on top of those of every in-tree replacement."""

from __future__ import annotations

from pydantic import Field

from operators.core.settings import InTreeReplacementSettings, SurfaceMode


class Settings(InTreeReplacementSettings):
    workload_claims: SurfaceMode = Field(
        "auto",
        description="ResourceClaims of PodGroups (scheduling.k8s.io/v1beta1, gates GenericWorkload and "
        "DRAWorkloadResourceClaims): auto = when discovery serves podgroups; on = required (not ready "
        "while it is not served); off = never: member pods are handled one by one, as before 1.37.",
    )
