"""The I/O layer of the resourceclaim operator: watch events in, API calls out.

Watch side: each event is parsed into a projection, applied to the :class:`ClusterCache`,
and the keys the cache returns are enqueued. Nothing here calls the API, and an object
that cannot be parsed is logged with its reference and skipped (spec section 5).

Work side: a key is handed to its sync (``pod_sync.sync_pod``, ``claim_sync.sync_claim``,
``group_sync.sync_pod_group``), whose pure decisions are plans that the core's executor
(:mod:`operators.core.plan`) carries out against kube-apiserver:

- the pod and PodGroup statuses are server-side applies with our field manager and the
  object's UID;
- claim writes are full-object ``PUT`` s carrying the cached ``resourceVersion``;
- the claim delete carries a UID precondition;
- creates, updates and deletes name our field manager, so every write is attributable.

The last plan's result is the sync's result: the work queue retries a ``Retry`` with
client-go's rate-limited backoff (never sooner than a 429's ``Retry-After``) and forgets
the failures of ``Done`` and ``GiveUp``; ``GiveUp`` input is re-evaluated only by the next
watch event (section 6).

Keys are :class:`~operators.core.keys.Key` s of kind ``pod``, ``claim`` and ``podgroup``, and
one periodic key, :data:`CONFIRM_KEY`: the 60 s check of created claims the watch has not
confirmed yet (section 7.3). It runs 60 s after a create succeeds, and again every 60 s for as
long as created claims wait for their confirmation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from operators.core import metrics as core_metrics
from operators.core.keys import CLAIM, POD, Key
from operators.core.models import body_key, last_known, parse_or_skip
from operators.core.reconcile import Result
from operators.core.resources import ApiResource
from operators.core.runtime import Runtime
from operators.dra.podgroups import (
    POD_GROUPS,
    SCHEDULING_GROUP,
    WORKLOAD_CLAIMS_NOT_SERVED,
    PodGroup,
    workload_claims_on,
)
from operators.dra.pods import pod_event_matters

from . import metrics
from .cache import DELETED, ClusterCache
from .claim_sync import sync_claim
from .constants import JUST_CREATED_CONFIRMATION_SECONDS
from .group_sync import sync_pod_group
from .models import Pod, ResourceClaim, ResourceClaimTemplate
from .pod_sync import confirm_created_claims, sync_pod
from .resolution import POD_GROUP
from .settings import Settings

log = logging.getLogger(__name__)

CONFIRM_KEY = Key.periodic("confirm-created-claims")

Watched = TypeVar("Watched", Pod, ResourceClaim, ResourceClaimTemplate, PodGroup)


class ResourceClaimController:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        settings = runtime.settings
        self.workload_claims_mode = settings.workload_claims if isinstance(settings, Settings) else "auto"
        # The served version once prepare() found one; PodGroups are read and written in it.
        self.pod_groups: ApiResource = POD_GROUPS
        self.cache = ClusterCache()
        metrics.state.observe(self.cache)
        core_metrics.report_cache(self.cache)
        # Not at start: a create arms it (see _created), and it re-arms while claims wait.
        runtime.queue.every(
            CONFIRM_KEY,
            JUST_CREATED_CONFIRMATION_SECONDS,
            first=None,
            repeat_while=lambda: self.cache.just_created_count() > 0,
        )

    # -- start ------------------------------------------------------------------------------

    async def prepare(self) -> bool:
        """Section 12, step 1: the operator needs both kinds in resource.k8s.io/v1 (their watches
        are required: the runtime calls this only once both are served); PodGroup claims are on
        where PodGroups are served (in the version the runtime discovered for the watch,
        POD_GROUP_VERSIONS), unless --workload-claims says otherwise."""
        pod_groups = self.runtime.served_resource(SCHEDULING_GROUP, POD_GROUPS.plural)
        enabled = workload_claims_on(self.workload_claims_mode, pod_groups is not None)
        if enabled is None:
            log.warning(WORKLOAD_CLAIMS_NOT_SERVED)
            return False
        if pod_groups is not None:
            self.pod_groups = pod_groups
            self.cache.pod_group_api_version = pod_groups.api_version
        self.cache.workload_claims = enabled
        metrics.workload_claims.set(1 if self.cache.workload_claims else 0)
        log.info(
            "PodGroup ResourceClaims are %s (--workload-claims=%s, podgroups %s)",
            "on" if self.cache.workload_claims else "off",
            self.workload_claims_mode,
            f"served as {pod_groups.api_version}" if pod_groups is not None else "not served",
        )
        return True

    def watches_pod_groups(self) -> bool:
        return self.workload_claims_mode != "off"

    # -- watch side ---------------------------------------------------------------------------

    def upsert_pod(self, body: Mapping[str, Any]) -> None:
        self._observe_pod(None, body)

    def delete_pod(self, body: Mapping[str, Any]) -> None:
        self._observe_pod(DELETED, body)

    def _observe_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        if not pod_event_matters(body, self.cache.pod):
            return
        pod = _final_state(body, self.cache.pod, Pod)
        if pod is not None:
            self._enqueue(self.cache.apply_pod_event(event_type, pod))

    def upsert_claim(self, body: Mapping[str, Any]) -> None:
        self._observe_claim(None, body)

    def delete_claim(self, body: Mapping[str, Any]) -> None:
        self._observe_claim(DELETED, body)

    def _observe_claim(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        if event_type == DELETED:
            claim = _final_state(body, self.cache.claim, ResourceClaim, ResourceClaim.from_body)
        else:
            claim = self._known_claim(body) or parse_or_skip(
                ResourceClaim, dict(body), log, ResourceClaim.from_body
            )
        if claim is not None:
            self._enqueue(self.cache.apply_claim_event(event_type, claim))

    def upsert_template(self, body: Mapping[str, Any]) -> None:
        self._observe_template(None, body)

    def delete_template(self, body: Mapping[str, Any]) -> None:
        self._observe_template(DELETED, body)

    def _observe_template(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        template = _final_state(body, self.cache.template, ResourceClaimTemplate)
        if template is not None:
            self._enqueue(self.cache.apply_template_event(event_type, template))

    def upsert_pod_group(self, body: Mapping[str, Any]) -> None:
        self._observe_pod_group(None, body)

    def delete_pod_group(self, body: Mapping[str, Any]) -> None:
        self._observe_pod_group(DELETED, body)

    def _observe_pod_group(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        group = _final_state(body, self.cache.pod_group, PodGroup)
        if group is not None:
            self._enqueue(self.cache.apply_pod_group_event(event_type, group))

    def _known_claim(self, body: Mapping[str, Any]) -> ResourceClaim | None:
        metadata = body.get("metadata")
        if not isinstance(metadata, Mapping):
            return None
        namespace, name, uid, version = (
            str(metadata.get(key) or "") for key in ("namespace", "name", "uid", "resourceVersion")
        )
        return self.cache.known_claim(namespace, name, uid, version)

    def _enqueue(self, keys: Sequence[Key]) -> None:
        for key in keys:
            self.runtime.queue.add(key)

    # -- work side ----------------------------------------------------------------------------

    async def sync(self, key: Key) -> Result:
        if key.kind == POD:
            return await sync_pod(self.cache, key.namespace, key.name, self.runtime, self._created)
        if key.kind == POD_GROUP:
            return await sync_pod_group(
                self.cache, key.namespace, key.name, self.runtime, self.pod_groups, self._created
            )
        if key.kind == CLAIM:
            return await sync_claim(self.cache, key.namespace, key.name, self.runtime, self.pod_groups)
        if key == CONFIRM_KEY:
            return await confirm_created_claims(self.cache, self.runtime.client)
        raise ValueError(f"not a resourceclaim work key: {key!r}")

    def _created(self, _: ResourceClaim) -> None:
        # Should the watch never deliver it, the record is checked with a live GET (7.3).
        self.runtime.queue.add_after(CONFIRM_KEY, JUST_CREATED_CONFIRMATION_SECONDS)


def _final_state(
    body: Mapping[str, Any],
    cached: Callable[[str, str], Watched | None],
    model: type[Watched],
    reader: Callable[[Mapping[str, Any]], Watched] | None = None,
) -> Watched | None:
    """The object an event is about. A tombstone carries no spec or status, and routing a deletion
    by those (the claims a pod or PodGroup used) would release nothing: it stands for the state
    cached under its key and UID. Where nothing of that UID is cached, its name and UID are all
    the deletion needs, and the tombstone parses as an object without spec or status."""
    return last_known(body, cached(*body_key(body))) or parse_or_skip(model, dict(body), log, reader)
