"""Base class for the typed views of Kubernetes objects the operators read.

The operators model only the fields they use: unknown fields are ignored, names are the
API's camelCase, and Python code uses snake_case.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


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


def camel_fields(instance: DataclassInstance) -> dict[str, Any]:
    """A plain dataclass's fields under the API's camelCase names, as a :class:`KubeModel` is dumped:
    for the small status entries computed on a hot path, where a model would cost its validation."""
    return {to_camel(field.name): getattr(instance, field.name) for field in dataclasses.fields(instance)}


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

    @property
    def group(self) -> str:
        """The owner's API group (empty for the core group)."""
        return self.api_version.rpartition("/")[0]

    def is_a(self, group: str, kind: str) -> bool:
        """Whether the owner is a ``kind`` of ``group``, in whichever version the reference was
        written: one object is served at every version of its group, so a reference written
        before a new version was served still names it (kube-controller-manager's controllers
        resolve theirs by kind, name and UID, never by version)."""
        return self.kind == kind and self.group == group


def controller_of(references: Iterable[OwnerReference]) -> OwnerReference | None:
    """The reference with ``controller: true``; the API server allows at most one."""
    for reference in references:
        if reference.controller:
            return reference
    return None


def body_controller(body: Mapping[str, Any]) -> OwnerReference | None:
    """:func:`controller_of` a watched body, read before (or without) parsing it; None also when
    that reference does not parse."""
    for reference in body_metadata(body).get("ownerReferences") or ():
        if isinstance(reference, Mapping) and reference.get("controller"):
            try:
                return OwnerReference.model_validate(reference)
            except ValidationError:
                return None
    return None


class LeanMeta(KubeModel):
    """The metadata a cache of many objects keeps: labels, annotations and managed fields cost memory."""

    name: str
    namespace: str = ""
    uid: str = ""
    generation: int = 0
    deletion_timestamp: str | None = None
    owner_references: Annotated[tuple[OwnerReference, ...], NoneAsEmpty] = ()

    @property
    def controller(self) -> OwnerReference | None:
        return controller_of(self.owner_references)

    def controlled_by(self, uid: str) -> bool:
        controller = self.controller
        return controller is not None and controller.uid == uid


class LeanObject(KubeModel):
    """A namespaced object cached with its lean metadata, found by its namespace and name."""

    metadata: LeanMeta

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def uid(self) -> str:
        return self.metadata.uid

    @property
    def key(self) -> tuple[str, str]:
        return (self.metadata.namespace, self.metadata.name)


ObjectMeta.model_rebuild()


Model = TypeVar("Model", bound=BaseModel)


class UnparsableObject(ValueError):
    """A watched object that does not fit its projection; the watch callback logs and skips it."""

    def __init__(self, reference: str, problem: str) -> None:
        super().__init__(f"{reference}: {problem}")
        self.reference = reference
        self.problem = problem


def reference(body: Mapping[str, Any], kind: str = "") -> str:
    """``Kind namespace/name`` for logs, from whatever the body still provides."""
    kind = str(body.get("kind") or kind or "object")
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return f"{kind} (no metadata)"
    name = str(metadata.get("name"))
    return f"{kind} {metadata['namespace']}/{name}" if metadata.get("namespace") else f"{kind} {name}"


def parse(
    model: type[Model], body: Mapping[str, Any], reader: Callable[[Mapping[str, Any]], Model] | None = None
) -> Model:
    """``model`` parsed from ``body``, by ``reader`` when the model has its own parsing function (one
    that keeps more than fields); raises :class:`UnparsableObject`."""
    try:
        return (reader or model.model_validate)(body)
    except ValidationError as error:
        # A parametrised generic model is named ``ResourceSlice[Device]``; the kind is the part before.
        kind = model.__name__.partition("[")[0]
        problem = f"{error.error_count()} invalid field(s): {error}"
        raise UnparsableObject(reference(body, kind), problem) from None


def parse_or_skip(
    model: type[Model],
    body: Mapping[str, Any],
    log: logging.Logger,
    reader: Callable[[Mapping[str, Any]], Model] | None = None,
) -> Model | None:
    """The projection of a watched object, or None after one warning naming it: a watch callback
    must not fail on an object admission let through in a shape the operator cannot read."""
    try:
        return parse(model, body, reader)
    except UnparsableObject as error:
        log_skipped(log, error)
        return None


def body_name(body: Mapping[str, Any]) -> str:
    """``metadata.name`` of a watched body, read before (or without) parsing it."""
    return str(body_metadata(body).get("name") or "")


def body_key(body: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of a watched body; the namespace is empty for a cluster-scoped one."""
    return (str(body_metadata(body).get("namespace") or ""), body_name(body))


def body_metadata(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` of a watched body, empty when it is missing or not a map."""
    metadata = body.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


class Tombstone(dict[str, Any]):
    """A deleted object whose final state is unknown, as client-go's ``DeletedFinalStateUnknown``:
    it vanished while no watch saw it go (a re-list after 410 Gone, or before the first watch), so
    only its apiVersion, kind, namespace, name and UID are known. A delete handler removes what it
    holds under that key and UID, reading the last state it cached (:func:`last_known`), never the
    tombstone's missing spec or status."""


def tombstone(body: Mapping[str, Any]) -> Tombstone:
    """The tombstone of ``body``: what is known of an object once it is gone."""
    metadata = body_metadata(body)
    return Tombstone(
        apiVersion=body.get("apiVersion"),
        kind=body.get("kind"),
        metadata={key: metadata[key] for key in ("name", "namespace", "uid") if key in metadata},
    )


def superseded(body: Mapping[str, Any], uid: str | None) -> bool:
    """Whether the deletion ``body`` is the tombstone of another object than the one of ``uid`` kept
    under its name (None: none is), and so changes nothing. A re-list hands over the objects it
    finds before the deletions it infers: the tombstone of an object deleted and created again under
    its name during the gap comes after its successor, which must stay."""
    if not isinstance(body, Tombstone):
        return False
    gone = body_metadata(body).get("uid")
    return not gone or gone != uid


def _uid_of(cached: Any) -> str | None:
    return getattr(getattr(cached, "metadata", None), "uid", None)


def last_known(body: Mapping[str, Any], cached: Model | None) -> Model | None:
    """For a deletion: ``cached`` (the state last seen) when ``body`` is a tombstone of that object
    (same UID), else None, and the handler reads the final state from ``body`` itself."""
    if not isinstance(body, Tombstone) or superseded(body, _uid_of(cached)):
        return None
    return cached


def stale(body: Mapping[str, Any], cached: Any) -> bool:
    """:func:`superseded`, for the object ``cached`` under the deletion's name (None: none is)."""
    return superseded(body, _uid_of(cached))


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def forget(objects: dict[K, V], key: K, body: Mapping[str, Any]) -> V | None:
    """Removes what ``objects`` keeps under ``key`` for the deletion ``body`` and returns it; None
    when nothing is kept or ``body`` is the tombstone of an earlier object of that name
    (:func:`stale`)."""
    if stale(body, objects.get(key)):
        return None
    return objects.pop(key, None)


def store(objects: dict[K, Model], key: K, model: type[Model], body: Mapping[str, Any]) -> Model:
    """Parses ``body`` into ``objects[key]``. A body that does not parse raises
    :class:`UnparsableObject` and leaves ``objects`` as it was: the caller makes it the object's
    deletion (a cache must not go on deciding on an older version of an object that has since
    changed), and that deletion reads what was kept to say which decisions it concerned."""
    objects[key] = parsed = parse(model, body)
    return parsed


def store_if(
    objects: dict[K, Model],
    key: K,
    model: type[Model],
    body: Mapping[str, Any],
    wanted: Callable[[Model], bool],
) -> bool:
    """Keeps the parsed ``body`` under ``key`` only while it is ``wanted`` (an allocated claim, a pod
    that reports health), so a cache holds no more than its decisions read. Whether the cache
    changed: False when the object was neither kept before nor now, and nothing needs reconciling.
    A body that does not parse leaves ``objects`` as it was, as in :func:`store`."""
    parsed = parse(model, body)
    had = objects.pop(key, None) is not None
    if wanted(parsed):
        objects[key] = parsed
        return True
    return had


def log_skipped(log: logging.Logger, error: UnparsableObject) -> None:
    log.warning(
        "skipping %s that cannot be parsed: %s",
        error.reference,
        error.problem,
        extra={"object": error.reference},
    )
