"""Names the devicehealth e2e modules share."""

from __future__ import annotations

from e2e.product.support import RESOURCE

POLICIES = "/apis/dra-operators.io/v1alpha1/devicehealthpolicies"
RULES = f"{RESOURCE}/devicetaintrules"
POLICY_UID_LABEL = "dra-operators.io/health-policy-uid"
# What the test driver publishes on a device it reports Unhealthy: a driver's health taint.
SIGNAL = {"key": "dra-operators.test/unhealthy", "value": "ecc", "effect": "None"}
# The container ends at once on SIGTERM, so its stop measures the eviction, not a grace period.
SCRIPT = "trap 'exit 0' TERM; sleep 3600 & wait"
