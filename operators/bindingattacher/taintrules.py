"""Keeping a failed device from being picked again (spec §14, ``onFailure.taintDevice``).

KEP-5007 asks whoever reports a binding failure to make sure the scheduler does not choose
the same broken device again at once. The attacher does that with a ``NoSchedule``
DeviceTaintRule per device, named after the device key, labelled with the policy and
annotated with an expiry; the garbage-collection sweep deletes rules whose expiry passed.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from operators.core.client import ApiError, KubeClient
from operators.core.conditions import format_time, parse_time

from .identity import DeviceKey, taint_rule_name
from .ledger import LABEL_POLICY

log = logging.getLogger(__name__)

RULES_PATH = "/apis/resource.k8s.io/v1/devicetaintrules"
TAINT_KEY = "dra-operators.io/attach-failed"
EXPIRES_ANNOTATION = "dra-operators.io/expires-at"


def rule_body(device: DeviceKey, reason: str, policy_name: str, expires: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": taint_rule_name(device),
            "labels": {LABEL_POLICY: policy_name},
            "annotations": {EXPIRES_ANNOTATION: format_time(expires)},
        },
        "spec": {
            "deviceSelector": {"driver": device.driver, "pool": device.pool, "device": device.device},
            "taint": {"key": TAINT_KEY, "value": reason[:63], "effect": "NoSchedule"},
        },
    }


def expired(rule: dict[str, Any], now: datetime) -> bool:
    stamp = ((rule.get("metadata") or {}).get("annotations") or {}).get(EXPIRES_ANNOTATION)
    if not stamp:
        return False
    try:
        return parse_time(stamp) <= now
    except ValueError:
        return True  # an unreadable expiry was not written by us as such; do not keep it forever


class TaintRules:
    def __init__(self, client: KubeClient, field_manager: str) -> None:
        self.client = client
        self.field_manager = field_manager

    async def taint(self, device: DeviceKey, reason: str, policy_name: str, duration: timedelta) -> None:
        body = rule_body(device, reason, policy_name, datetime.now(UTC) + duration)
        try:
            await self.client.create(RULES_PATH, body, fieldManager=self.field_manager)
        except ApiError as err:
            if not err.conflict:
                log.warning("could not taint device %s: %s", device, err)

    async def sweep(self) -> None:
        """Delete our rules whose expiry has passed."""
        try:
            listing = await self.client.get(RULES_PATH, labelSelector=LABEL_POLICY)
        except ApiError as err:
            log.warning("could not list DeviceTaintRules: %s", err)
            return
        now = datetime.now(UTC)
        for rule in listing.get("items", []):
            if not expired(rule, now):
                continue
            meta = rule.get("metadata") or {}
            try:
                await self.client.delete(f"{RULES_PATH}/{meta.get('name')}", uid=meta.get("uid"))
            except ApiError as err:
                if not err.not_found and not err.conflict:
                    log.warning("could not delete expired DeviceTaintRule %s: %s", meta.get("name"), err)
