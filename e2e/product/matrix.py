"""The support matrix: what each supported Kubernetes version serves with its default settings, and
so what each operator can do there. The table of docs/install.md is rendered from it (``render()``; a unit
test compares the two) and the version pass asserts it against a real cluster of each version
(``test_versions_*.py``), so the table users read is the one the tests hold.

The facts come from each version's feature gates (k8s.io/kubernetes ``pkg/features``) and API
registrations, read in that version's sources; the lab profile (every alpha DRA gate and API of the
newest version on) is a column of its own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Served:
    """What a cluster serves, as the operators can tell by discovery or by what a write returns."""

    slice_taints: bool
    """ResourceSlice device taints are kept (gate DRADeviceTaints)."""
    rule_version: str | None
    """The DeviceTaintRule version served (resource.k8s.io), or None."""
    binding_conditions: bool
    """ResourceSlice devices keep bindingConditions (gate DRADeviceBindingConditions)."""
    builtin_pool_status: bool
    """resource.k8s.io/v1alpha3 ResourcePoolStatusRequests (gate DRAResourcePoolStatus + runtime config)."""
    pod_group_claims: str | None
    """The scheduling.k8s.io version of PodGroups with resourceClaims, or None."""


# (minor, profile) -> what is served.
SERVED: dict[tuple[int, str], Served] = {
    (35, "defaults"): Served(False, None, False, False, None),
    (36, "defaults"): Served(True, None, True, False, None),
    (37, "defaults"): Served(True, "v1", True, False, None),
    (37, "lab"): Served(True, "v1", True, True, None),
}

# The message a user sees where a capability is missing, per missing piece.
NO_RULES = "no DeviceTaintRule API"
GATE_NOTES = {
    35: {
        "rules": "DRADeviceTaintRules gate and resource.k8s.io/v1alpha3",
        "slice_taints": "DRADeviceTaints gate",
        "binding": "DRADeviceBindingConditions gate",
    },
    36: {"rules": "DRADeviceTaintRules gate and resource.k8s.io/v1beta2"},
}
POOL_STATUS_GATE = "DRAResourcePoolStatus gate and resource.k8s.io/v1alpha3"


def cells(minor: int, profile: str) -> dict[str, str]:
    """One column of the table: operator (and capability) -> what works."""
    served = SERVED[(minor, profile)]
    gates = GATE_NOTES.get(minor, {})

    def needs(available: bool, key: str) -> str:
        return "works" if available else f"needs the {gates[key]}"

    builtin = "works" if served.builtin_pool_status else f"needs the {POOL_STATUS_GATE}"
    if minor == 35 and not served.builtin_pool_status:
        builtin = "not available (the API arrived in 1.36)"
    return {
        "resourceclaim": "works",
        "devicetaint: ResourceSlice taints": needs(served.slice_taints, "slice_taints"),
        "devicetaint: DeviceTaintRules": needs(served.rule_version is not None, "rules"),
        "poolstatus: project CRD": "works",
        "poolstatus: built-in API": builtin,
        "bindingattacher": needs(served.binding_conditions, "binding"),
        "bindingattacher: onFailure.taintDevice": needs(served.rule_version is not None, "rules"),
        "taintselector, kubectl dra taint/drain": needs(served.rule_version is not None, "rules"),
    }


COLUMNS = ((35, "defaults"), (36, "defaults"), (37, "defaults"), (37, "lab"))


def render() -> str:
    """The Markdown table of the support matrix (docs/install.md)."""
    columns = [cells(minor, profile) for minor, profile in COLUMNS]
    head = ["", *(f"1.{minor} {profile}" for minor, profile in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in columns[0]:
        lines.append("| " + " | ".join([row, *(column[row] for column in columns)]) + " |")
    return "\n".join(lines) + "\n"
