"""kopf keeps no state of its own on the watched objects: nothing to write."""

from __future__ import annotations

from typing import Any, cast

import kopf

from operators.core import runtime

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "n", "uid": "u1"},
}


def test_diffbase_and_progress_storages_keep_nothing() -> None:
    settings = runtime.kopf_settings()
    body = kopf.Body(cast(kopf.RawBody, POD))
    # Equal essences: kopf finds no difference, and computes none, on every event.
    assert settings.persistence.diffbase_storage.build(body=body) == {}
    assert settings.persistence.diffbase_storage.fetch(body=body) == {}
    assert settings.persistence.progress_storage.fetch(key=kopf.HandlerId("h"), body=body) is None


def test_per_object_workers_are_bounded_and_short_lived() -> None:
    settings = runtime.kopf_settings()
    assert settings.queueing.worker_limit == runtime.KOPF_WORKER_LIMIT
    assert settings.queueing.idle_timeout < 1
    assert settings.watching.chunk_size == runtime.LIST_PAGE_SIZE
