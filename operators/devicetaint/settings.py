"""Options of the devicetaint operator, on top of those of every in-tree replacement."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from operators.dra.podgroups import WorkloadClaimsSettings

EvictionMode = Literal["delete", "evict"]


class Settings(WorkloadClaimsSettings):
    eviction_mode: EvictionMode = Field(
        "delete",
        description="How a pod is evicted: delete = a DELETE with the pod's UID as precondition, as the "
        "seed and upstream do; evict = the Eviction API (pods/eviction), which honours "
        "PodDisruptionBudgets: a pod whose budget allows no disruption is retried with backoff until "
        "it does, with a Warning Event naming the budget.",
    )
