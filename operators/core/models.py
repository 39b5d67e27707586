"""Base class for the typed views of Kubernetes objects the operators read.

The operators model only the fields they use: unknown fields are ignored, names are the
API's camelCase, and Python code uses snake_case.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel


def _none_as_empty(value: Any) -> Any:
    return () if value is None else value


def _none_as_empty_map(value: Any) -> Any:
    return {} if value is None else value


# Kubernetes omits empty lists and maps, but a hand-written object may carry ``null`` for one; that
# reads as empty instead of making the whole object unparsable.
NoneAsEmpty = BeforeValidator(_none_as_empty)
NoneAsEmptyMap = BeforeValidator(_none_as_empty_map)


class KubeModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
    )


class ObjectMeta(KubeModel):
    name: str = ""
    namespace: str | None = None
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: str | None = None
    creation_timestamp: str | None = None
    generate_name: str | None = None
    owner_references: tuple[OwnerReference, ...] = ()


class OwnerReference(KubeModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class LeanMeta(KubeModel):
    """The metadata a cache of many objects keeps: labels, annotations and managed fields cost memory."""

    name: str
    namespace: str = ""
    uid: str = ""
    generation: int = 0
    deletion_timestamp: str | None = None
    owner_references: Annotated[tuple[OwnerReference, ...], NoneAsEmpty] = ()

    def controlled_by(self, uid: str) -> bool:
        return any(ref.controller and ref.uid == uid for ref in self.owner_references)


ObjectMeta.model_rebuild()
