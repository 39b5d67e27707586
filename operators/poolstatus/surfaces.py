"""The two APIs that carry requests, and which of them the process serves (spec section 2.2).

The decision is taken once at start-up from discovery; a later change of availability is
answered by restarting the process (exit status 3), because the watches are set up once.
Everything here is pure; the controller feeds it what the runtime's discovery found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from operators.core import PROJECT_GROUP
from operators.core.discovery import ServedResource
from operators.core.resources import ApiResource
from operators.dra.api import GROUP

Mode = Literal["auto", "on", "off"]

PLURAL = "resourcepoolstatusrequests"
EXIT_REQUIRED_SURFACE_MISSING = 2
EXIT_AVAILABILITY_CHANGED = 3


@dataclass(frozen=True)
class Surface(ApiResource):
    """One API serving ResourcePoolStatusRequests: the built-in one or the project's CRD."""

    plural: str = PLURAL
    namespaced: bool = False


BUILTIN = Surface(GROUP, "v1alpha3")
PROJECT = Surface(PROJECT_GROUP, "v1alpha1")
SURFACES = (BUILTIN, PROJECT)


def available(served: ServedResource | None) -> bool:
    """Discovery lists the resource *and* its status subresource (we can only write there)."""
    return served is not None and "status" in served.subresources


@dataclass(frozen=True)
class Decision:
    served: tuple[Surface, ...]
    missing_required: tuple[Surface, ...]
    """Surfaces set to ``on`` that discovery does not show: the process must exit with 2."""


def decide(modes: Mapping[Surface, Mode], availability: Mapping[Surface, bool]) -> Decision:
    served = []
    missing = []
    for surface in SURFACES:
        mode = modes.get(surface, "auto")
        if mode == "off":
            continue
        if availability.get(surface, False):
            served.append(surface)
        elif mode == "on":
            missing.append(surface)
    return Decision(tuple(served), tuple(missing))


def changes(
    modes: Mapping[Surface, Mode], served: tuple[Surface, ...], availability: Mapping[Surface, bool]
) -> list[str]:
    """Log lines for surfaces whose availability no longer matches what is served.

    An ``off`` surface never matters. Any other mismatch means the watches are wrong and
    the process must restart to pick the new set up.
    """
    lines = []
    for surface in SURFACES:
        if modes.get(surface, "auto") == "off":
            continue
        now = availability.get(surface, False)
        if now != (surface in served):
            state = "available" if now else "unavailable"
            lines.append(f"API surface {surface.api_version} became {state}")
    return lines
