"""Writes of ``DeviceAttachment`` records (spec §8, §13.2), always against the freshest version.

* create: one POST carrying the first phase (the CRD has no status subresource, so the intent
  is durable in one write);
* update: a PUT of the whole object with its ``resourceVersion``, so a decision taken on a
  stale record turns into a conflict;
* finish: one PUT that removes the finalizer ``dra-operators.io/detach`` (and stores the final
  status), then a DELETE with a UID precondition.

Every answer of the API server is put into the ledger index at once, so the next decision
never waits for the watch. A conflict or an unexpected "already exists" re-reads the record
and raises :class:`~operators.core.reconcile.Interrupt`, so the claim is reconciled again from
the fresh record instead of retrying a write built on stale data.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from operators.core.client import ApiError, KubeClient
from operators.core.reconcile import Interrupt, Requeue

from .cache import put_record
from .ledger import FINALIZER, PLURAL, LedgerIndex, manifest
from .models import API_VERSION, DeviceAttachment


class LedgerWriter:
    def __init__(self, client: KubeClient, index: LedgerIndex, namespace: str, field_manager: str) -> None:
        self.client = client
        self.index = index
        self.namespace = namespace
        self.field_manager = field_manager

    @property
    def collection(self) -> str:
        return f"/apis/{API_VERSION}/namespaces/{self.namespace}/{PLURAL}"

    def path(self, name: str) -> str:
        return f"{self.collection}/{name}"

    def _store(self, body: Any) -> DeviceAttachment:
        try:
            record = DeviceAttachment.model_validate(body)
        except ValidationError as err:
            raise Interrupt(Requeue(5.0, f"the API server returned an unreadable record: {err}")) from err
        put_record(self.index, record)
        return self.index.get(record.metadata.name) or record

    async def _refresh(self, name: str, why: str, err: ApiError) -> Interrupt:
        try:
            self._store(await self.client.get(self.path(name)))
        except ApiError as read:
            if not read.not_found:
                raise
            self.index.remove(name)
        return Interrupt(Requeue(0.0, f"record {name}: {why} ({err.reason})"))

    async def create(self, record: DeviceAttachment) -> DeviceAttachment:
        try:
            body = await self.client.create(
                self.collection, manifest(record), fieldManager=self.field_manager
            )
        except ApiError as err:
            if err.conflict:
                raise await self._refresh(record.metadata.name, "exists already", err) from err
            raise
        return self._store(body)

    def _body(self, record: DeviceAttachment, finalizers: tuple[str, ...]) -> dict[str, Any]:
        body = manifest(record)
        meta = record.metadata
        body["metadata"].update(
            {
                "resourceVersion": meta.resource_version,
                "uid": meta.uid,
                "finalizers": list(finalizers),
                "annotations": dict(meta.annotations),
            }
        )
        return body

    async def update(self, record: DeviceAttachment) -> DeviceAttachment:
        try:
            body = await self.client.replace(
                self.path(record.metadata.name),
                self._body(record, record.metadata.finalizers),
                fieldManager=self.field_manager,
            )
        except ApiError as err:
            if err.conflict or err.not_found:
                raise await self._refresh(record.metadata.name, "changed meanwhile", err) from err
            raise
        return self._store(body)

    async def finish(self, record: DeviceAttachment) -> None:
        """Store the final status without our finalizer, then delete the record."""
        name = record.metadata.name
        current = record
        if FINALIZER in record.metadata.finalizers and record.metadata.resource_version:
            remaining = tuple(f for f in record.metadata.finalizers if f != FINALIZER)
            try:
                current = self._store(
                    await self.client.replace(
                        self.path(name), self._body(record, remaining), fieldManager=self.field_manager
                    )
                )
            except ApiError as err:
                if err.not_found:
                    self.index.remove(name)
                    return
                if err.conflict:
                    raise await self._refresh(name, "changed meanwhile", err) from err
                raise
        try:
            await self.client.delete(self.path(name), uid=current.metadata.uid or None)
        except ApiError as err:
            if not err.not_found and not err.conflict:
                raise
        self.index.remove(name)
