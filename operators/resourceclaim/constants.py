"""Names, annotation keys and limits of the resourceclaim operator (spec section 2).

They are API: Events, field ownership and metrics are attributed with them, and the
annotations tie generated claims to pod claim entries across restarts.
"""

from __future__ import annotations

from typing import Final

OPERATOR_NAME: Final = "resourceclaim"
"""Work-queue ``name`` label and the operator's name on the command line."""

POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
"""Set on generated claims to the pod claim entry name; the duplicate check (7.3) keys on it."""

EXTENDED_RESOURCE_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
"""Set to ``"true"`` by kube-scheduler on the claims it creates for extended resources."""

DELETE_PROTECTION_FINALIZER: Final = "resource.kubernetes.io/delete-protection"
"""Added by kube-scheduler on allocation; we remove it once the claim is deallocated."""

MAX_GENERATE_NAME_BASE: Final = 57
"""63-character names minus the 5 random characters kube-apiserver appends and one spare."""

DELETED_CONSUMER_MEMORY: Final = 500
"""How many deleted pod and PodGroup UIDs are remembered, to spare a live GET per stale
reservation (one memory for both kinds, as upstream's)."""

JUST_CREATED_CONFIRMATION_SECONDS: Final = 60.0
"""How long a created claim may stay unseen by the watch before a live GET checks it."""

FAILED_CREATION_REASON: Final = "FailedResourceClaimCreation"
"""Event reason for every pod or PodGroup claim entry that could not be handled."""
