"""Server-side apply of one driver's ``status.devices`` entries on a claim (spec §11.1, §11.3).

One field manager per driver (``devicestatus.field_manager``) owns exactly that driver's
entries, so other drivers' entries and other writers' fields are never touched, and the
body's ``metadata.uid``/``resourceVersion`` make the apply a compare-and-set on the claim
version the decision was taken on. The answer is the new claim; it goes straight into the
cache. A rejection is raised as :class:`StatusWriteError`, classified the way §11.3 handles it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from operators.core.client import ApiError, KubeClient

from . import metrics
from .cache import ClaimCache, project_claim
from .devicestatus import WriteError, apply_body, classify_write_error, field_manager
from .models import ResourceClaim

CLAIMS_API = "/apis/resource.k8s.io/v1"


def claim_path(namespace: str, name: str, subresource: str = "") -> str:
    path = f"{CLAIMS_API}/namespaces/{namespace}/resourceclaims/{name}"
    return f"{path}/{subresource}" if subresource else path


class StatusWriteError(Exception):
    def __init__(self, kind: WriteError, error: ApiError) -> None:
        super().__init__(f"{kind.value}: {error}")
        self.kind = kind
        self.error = error


def write_kind(entries: Sequence[Mapping[str, Any]], failure_types: frozenset[str]) -> str:
    """The ``kind`` label of ``claim_status_writes_total``: failure, ready or progress."""
    true = {c["type"] for e in entries for c in e["conditions"] if c["status"] == "True"}
    if true & failure_types:
        return "failure"
    return "ready" if true else "progress"


class StatusWriter:
    def __init__(
        self, client: KubeClient, reader: KubeClient, cache: ClaimCache, keep_test_annotations: bool
    ) -> None:
        self.client = client
        self.reader = reader
        self.cache = cache
        self.keep_test_annotations = keep_test_annotations

    async def apply(
        self, claim: ResourceClaim, driver: str, entries: Sequence[Mapping[str, Any]], kind: str
    ) -> ResourceClaim:
        meta = claim.metadata
        started = time.monotonic()
        try:
            written = await self.client.apply(
                claim_path(meta.namespace or "", meta.name, "status"),
                apply_body(claim, entries),
                field_manager(driver),
            )
        except ApiError as err:
            problem = classify_write_error(err.status, err.message)
            metrics.claim_status_writes.labels(driver=driver, kind=kind, result=problem.value).inc()
            raise StatusWriteError(problem, err) from err
        finally:
            metrics.claim_status_write_duration.labels(driver=driver).observe(time.monotonic() - started)
        metrics.claim_status_writes.labels(driver=driver, kind=kind, result="ok").inc()
        updated = project_claim(written, self.keep_test_annotations)
        self.cache.put(updated)
        return self.cache.get(updated.metadata.uid) or updated

    async def read(self, namespace: str, name: str, uid: str) -> ResourceClaim | None:
        """A live read of the claim; None when it is gone or is another claim of the same name, in
        which case the cache forgets it too (its DELETED event may have been missed or overtaken)."""
        try:
            body = await self.reader.get(claim_path(namespace, name))
        except ApiError as err:
            if err.not_found:
                self.cache.remove(uid)
                return None
            raise
        claim = project_claim(body, self.keep_test_annotations)
        if claim.metadata.uid != uid:
            self.cache.remove(uid)
            return None
        self.cache.put(claim)
        return self.cache.get(uid) or claim
