"""Building blocks of the taintselector e2e tests: the CRD, selectors, and what the operator wrote."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from e2e import harness
from e2e.support import Tracker

CRD_NAME = "devicetaintselectors.dra-operators.io"
CRD_PATH = REPO_ROOT / "crds" / f"{CRD_NAME}.yaml"
SELECTORS = "/apis/dra-operators.io/v1alpha1/devicetaintselectors"
RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
UID_LABEL = "dra-operators.io/taint-selector-uid"
KEY = "dra.example.com/unhealthy"


def install_crd(cluster: harness.Cluster) -> None:
    """Server-side apply of the shipped CRD (left installed: other modules may use it)."""
    cluster.kubectl("apply", "--server-side", "--field-manager=e2e-taintselector", "-f", str(CRD_PATH))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=30s")


def selector(
    objects: Tracker,
    name: str,
    effect: str,
    *,
    driver: str | None = None,
    device_class: str | None = None,
    expressions: Sequence[str] = (),
) -> dict[str, Any]:
    chosen: dict[str, Any] = {}
    if driver is not None:
        chosen["driver"] = driver
    if device_class is not None:
        chosen["deviceClassName"] = device_class
    if expressions:
        chosen["selectors"] = [{"cel": {"expression": e}} for e in expressions]
    return objects.create(
        SELECTORS,
        {
            "apiVersion": "dra-operators.io/v1alpha1",
            "kind": "DeviceTaintSelector",
            "metadata": {"name": name},
            "spec": {"taint": {"key": KEY, "value": "Broken", "effect": effect}, "deviceSelector": chosen},
        },
    )


def rules_of(api: Kube, uid: str) -> list[dict[str, Any]]:
    return api.list(RULES, labelSelector=f"{UID_LABEL}={uid}")


def tainted(api: Kube, uid: str) -> set[tuple[str, str, str]]:
    """(driver, pool, device) of every rule of the selector."""
    found = set()
    for rule in rules_of(api, uid):
        chosen = rule["spec"]["deviceSelector"]
        found.add((chosen["driver"], chosen["pool"], chosen["device"]))
    return found


def wait_tainted(api: Kube, uid: str, expected: set[tuple[str, str, str]], timeout: float = 30) -> None:
    wait_for(lambda: tainted(api, uid) == expected, timeout, f"exactly the rules {sorted(expected)}")


def condition(api: Kube, name: str, type_: str) -> dict[str, Any] | None:
    current = api.get_or_none(f"{SELECTORS}/{name}")
    for entry in ((current or {}).get("status") or {}).get("conditions") or ():
        if entry["type"] == type_:
            found: dict[str, Any] = entry
            return found
    return None


def wait_condition(
    api: Kube, name: str, type_: str, status: str, reason: str, timeout: float = 30
) -> dict[str, Any]:
    def matches() -> dict[str, Any] | None:
        found = condition(api, name, type_)
        return found if found and (found["status"], found["reason"]) == (status, reason) else None

    result = wait_for(matches, timeout, f"{name}: {type_}={status}/{reason}")
    assert result is not None
    return result


def uuid_devices(uuids: Mapping[str, str], driver: str) -> list[dict[str, Any]]:
    """Devices named by the keys, each with the vendor's unique-ID attribute ``uuid``."""
    return [{"name": name, "attributes": {"uuid": {"string": uuid}}} for name, uuid in uuids.items()]


def warning_events(api: Kube, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in api.list("/api/v1/namespaces/default/events")
        if e["involvedObject"].get("kind") == "DeviceTaintSelector"
        and e["involvedObject"].get("name") == name
        and e.get("type") == "Warning"
    ]
