"""Compatibility-group admission on one counter set (decision D4, spec section 10).

Devices that draw on the same counter set may only be allocated together when their
compatibility groups agree: grouped devices need a common group with *every* device
already on the set, and a device without groups only sits next to other devices without
groups. The scheduler tracks this as a running intersection per counter set; so do we.

States, as an immutable value so a walk can copy it freely:

* EMPTY: nothing placed yet; admits anything.
* NOGROUP: every member declared no groups; admits only devices without groups.
* GROUPS(S): the intersection of the members' groups; admits groups meeting S.
* BLOCKED: devices already allocated together contradict each other (their allocation
  predates the groups); nothing more can be admitted.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class _Kind(enum.Enum):
    EMPTY = "empty"
    NOGROUP = "nogroup"
    GROUPS = "groups"
    BLOCKED = "blocked"


@dataclass(frozen=True)
class CompatibilityState:
    kind: _Kind = _Kind.EMPTY
    groups: frozenset[str] = frozenset()

    def admits(self, groups: Iterable[str] | None) -> bool:
        wanted = frozenset(groups or ())
        if self.kind is _Kind.EMPTY:
            return True
        if self.kind is _Kind.NOGROUP:
            return not wanted
        if self.kind is _Kind.GROUPS:
            return bool(wanted & self.groups)
        return False

    def fold(self, groups: Iterable[str] | None) -> CompatibilityState:
        """The state after placing a device with ``groups``; BLOCKED if it was not admitted."""
        wanted = frozenset(groups or ())
        if not self.admits(wanted):
            return BLOCKED
        if self.kind is _Kind.EMPTY:
            return CompatibilityState(_Kind.GROUPS, wanted) if wanted else NOGROUP
        if self.kind is _Kind.NOGROUP:
            return self
        return CompatibilityState(_Kind.GROUPS, self.groups & wanted)

    @property
    def blocked(self) -> bool:
        return self.kind is _Kind.BLOCKED


EMPTY = CompatibilityState()
NOGROUP = CompatibilityState(_Kind.NOGROUP)
BLOCKED = CompatibilityState(_Kind.BLOCKED)


def groups_state(groups: Iterable[str]) -> CompatibilityState:
    """GROUPS(groups) for a non-empty ``groups``; handy for tests and seeding."""
    return CompatibilityState(_Kind.GROUPS, frozenset(groups))
