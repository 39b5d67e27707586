"""Names the devicehealth e2e modules share."""

from __future__ import annotations

from e2e.product.support import RESOURCE

CRD = "devicehealthpolicies.dra-operators.io"
POLICIES = "/apis/dra-operators.io/v1alpha1/devicehealthpolicies"
RULES = f"{RESOURCE}/devicetaintrules"
POLICY_UID_LABEL = "dra-operators.io/health-policy-uid"
