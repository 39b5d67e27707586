"""Base class for the typed views of Kubernetes objects the operators read.

The operators model only the fields they use: unknown fields are ignored, names are the
API's camelCase, and Python code uses snake_case.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


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


ObjectMeta.model_rebuild()
