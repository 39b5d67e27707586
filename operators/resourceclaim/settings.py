"""Options of the resourceclaim operator, on top of those of every in-tree replacement."""

from __future__ import annotations

from operators.dra.podgroups import WorkloadClaimsSettings


class Settings(WorkloadClaimsSettings):
    """--workload-claims decides whether PodGroups get claims of their own (section 14, row 6)."""
