"""Decide, then do: the writes a sync's pure code plans, and the one executor that carries them out.

A controller's ``sync(key)`` reads its cache, hands what it read to pure code, and gets back a
:class:`Plan`: the writes to send, in order, and the :data:`~operators.core.reconcile.Result` to
return once they are all done. :func:`execute` sends them and returns that Result, as
controller-runtime's ``Reconcile(Request) (Result, error)`` and upstream's ``syncHandler(key)``
return theirs. The pure code is tested on the plans it returns; the executor is tested once, here.

Every write is idempotent, so a plan that fails half-way is simply planned again on the retry:

===================  ========================================================  =============
step                 sent as                                                   also done on
===================  ========================================================  =============
:class:`Create`      POST to the collection                                    409 (exists)
:class:`Replace`     PUT of the whole object, the runtime's field manager      404 (gone)
:class:`Apply`       server-side apply, the runtime's field manager, forced    404 (gone)
:class:`Patch`       a patch (JSON merge unless ``content_type`` says)         404 (gone)
:class:`Delete`      DELETE with ``preconditions.uid``                         404, 409
:class:`Evict`       POST ``pods/<name>/eviction``, ``preconditions.uid``      404 (gone)
:class:`RecordEvent` queued for the Event recorder; never fails                -
:class:`Together`    its writes at once, at most ``limit`` in flight           its writes'
===================  ========================================================  =============

Preconditions travel in the body, where the API server checks them: a ``metadata.resourceVersion``
in a patch or a replaced object makes a write computed from an older view fail with 409. The ``uid``
of an :class:`Apply` or a :class:`Patch` is sent as ``metadata.uid``, which no update may change, so
the server refuses the write if the name now belongs to a re-created namesake: not with a 409 but
with a 422 whose cause is ``metadata.uid`` (kube-apiserver's ``rest.BeforeUpdate``; PATCH carries
no preconditions of its own). The executor takes that refusal for the write's 404, since the object
it was meant for is gone either way. A custom resource's ``status`` is the exception: its status
strategy copies the stored object's metadata over the one sent, so there the UID is dropped without
a word and only a ``resourceVersion`` would keep a write off a namesake. A create is looked up first
by the pure code (it plans creates only for what its cache lacks); AlreadyExists means the watch has
not delivered the object yet, and the next pass compares it.

Each write says which answers count as done (``tolerate``, the defaults above) and which end the
plan early with a Result of their own (``ends``, e.g. ``{404: Done("gone")}``, or a function of the
error for answers only the body tells apart, such as a PodDisruptionBudget's refusal of an
eviction). A sync whose cache must learn how the plan went hears of each write that is done
(``written``) and of the answer that ended the plan (``ended``). Any other API error is raised,
and the work queue makes it a :class:`~operators.core.reconcile.Retry`, with a traceback only when
it is not transient, as for every exception that escapes a sync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .client import MERGE_PATCH, ApiError, KubeClient, delete_options
from .events import EventRecorder, ObjectRef
from .reconcile import Done, Result
from .resources import PODS, ApiResource

__all__ = [
    "Apply",
    "Create",
    "Delete",
    "Ends",
    "Evict",
    "Patch",
    "Plan",
    "RecordEvent",
    "Replace",
    "Resend",
    "Step",
    "Together",
    "Write",
    "Writer",
    "execute",
    "status_apply",
]


Ends = Mapping[int, Result] | Callable[[ApiError], Result | None]
"""API answers that end the plan: a Result per status, or a function of the error (None: go on)."""


@dataclass(frozen=True, kw_only=True)
class _Answers:
    ends: Ends = field(default_factory=dict)
    """API answers that end the plan with this Result instead of the plan's own; looked at before
    ``tolerate``."""


def _tolerate(*statuses: int) -> Any:
    """API answers that mean the write's purpose is met or moot: the plan goes on."""
    return field(default=frozenset(statuses), kw_only=True)


@dataclass(frozen=True)
class Create(_Answers):
    """POST ``body`` to the collection at ``path``."""

    path: str
    body: Mapping[str, Any]
    tolerate: frozenset[int] = _tolerate(409)
    field_manager: bool = field(default=False, kw_only=True)
    """Name the runtime's field manager (``fieldManager``), so that the object's managed fields
    say who created it."""


def _uid() -> Any:
    return field(default="", kw_only=True)


def _send_uid(write: Apply | Patch) -> None:
    """Put the write's ``uid`` into its body, so that the body is what is sent."""
    if write.uid:
        metadata = {**(write.body.get("metadata") or {}), "uid": write.uid}
        object.__setattr__(write, "body", {**write.body, "metadata": metadata})


@dataclass(frozen=True)
class Apply(_Answers):
    """Server-side apply of ``body`` at ``path`` (an object or its ``status``), forcing our fields."""

    path: str
    body: Mapping[str, Any]
    tolerate: frozenset[int] = _tolerate(404)
    manager: str = field(default="", kw_only=True)
    """The field manager to apply as, where it is not the writer's: a field manager owns exactly
    the fields it applied, so a writer that keeps several sets of fields apart (one per driver in
    a claim's ``status.devices``) names one manager for each."""
    uid: str = _uid()
    """The UID of the object the write is meant for, sent as ``metadata.uid``; a namesake's refusal
    counts as a 404 (see the module's docstring for where the server does not refuse)."""

    def __post_init__(self) -> None:
        _send_uid(self)


def status_apply(
    resource: ApiResource,
    kind: str,
    name: str,
    uid: str,
    status: Mapping[str, Any],
    *,
    ends: Ends | None = None,
) -> Apply:
    """The whole ``status`` of a cluster-scoped object, for the incarnation with ``uid``."""
    body = {"apiVersion": resource.api_version, "kind": kind, "metadata": {"name": name}, "status": status}
    return Apply(resource.path(name, subresource="status"), body, ends=ends or {}, uid=uid)


@dataclass(frozen=True)
class Patch(_Answers):
    """A patch of ``path`` (a JSON merge patch unless ``content_type`` says otherwise)."""

    path: str
    body: Mapping[str, Any]
    content_type: str = MERGE_PATCH
    tolerate: frozenset[int] = _tolerate(404)
    uid: str = _uid()
    """As :attr:`Apply.uid`."""

    def __post_init__(self) -> None:
        _send_uid(self)


Resend = Callable[[KubeClient, str, str, Mapping[str, Any], ApiError], Awaitable[Any]]
"""Another way to send a refused :class:`Replace` (client, field manager, path, body, the
refusal): the reply of the write sent again, or the refusal raised where it does not apply."""


@dataclass(frozen=True)
class Replace(_Answers):
    """A PUT of the whole object at ``path`` (or its ``status``), naming the runtime's field
    manager: for objects written whole (a custom resource without a status subresource, a claim's
    finalizers). The ``metadata.resourceVersion`` in ``body`` makes it fail with 409 rather than
    overwrite a change it was not computed from."""

    path: str
    body: Mapping[str, Any]
    tolerate: frozenset[int] = _tolerate(404)
    resend: Resend | None = field(default=None, kw_only=True, compare=False)
    """What to do with an answer only another encoding of the body avoids (e.g. a ResourceClaim
    whose raw parameters JSON cannot write back, :mod:`operators.dra.claimwire`)."""


@dataclass(frozen=True)
class Delete(_Answers):
    """DELETE ``path`` if it is still the object with ``uid``.

    404: gone already; 409: the precondition failed, the name belongs to another object now."""

    path: str
    uid: str
    tolerate: frozenset[int] = _tolerate(404, 409)
    propagation: str = field(default="", kw_only=True)
    """The ``propagationPolicy`` (``Background``, ``Foreground``, ``Orphan``); empty: the server's
    default for the kind."""


@dataclass(frozen=True)
class Evict(_Answers):
    """Ask the Eviction API to evict the pod if it is still the one with ``uid``; the API server
    checks its PodDisruptionBudgets (a refusal is a 429, which a plan may map in ``ends``)."""

    namespace: str
    name: str
    uid: str
    tolerate: frozenset[int] = _tolerate(404)


@dataclass(frozen=True)
class RecordEvent:
    """A core v1 Event on ``ref``; queued for the recorder, so it neither waits nor fails."""

    ref: ObjectRef
    type: str
    reason: str
    message: str


Write = Create | Apply | Replace | Patch | Delete | Evict
"""A step that is an API call."""


@dataclass(frozen=True)
class Together:
    """Writes that do not depend on one another, sent at once with at most ``limit`` in flight.

    All of them are answered before the plan goes on or raises: a write that failed does not cut
    short the others, which would only be sent again on the retry."""

    writes: tuple[Write, ...]
    limit: int


Step = Write | RecordEvent | Together

_OPERATIONS: dict[type[Write], str] = {Create: "create", Patch: "update", Delete: "delete"}


def operation(write: Write) -> str | None:
    """What a metric ``by operation`` counts ``write`` as: create, update (a patch) or delete; None
    for the writes no such metric counts (an applied status, an eviction)."""
    return _OPERATIONS.get(type(write))


@dataclass(frozen=True)
class Plan:
    """What a sync does: ``steps`` in order, then ``result`` for the work queue."""

    steps: tuple[Step, ...] = ()
    result: Result = field(default_factory=Done)


class Writer(Protocol):
    """What the executor writes with; the operator's Runtime is one."""

    @property
    def client(self) -> KubeClient: ...

    @property
    def events(self) -> EventRecorder: ...

    @property
    def field_manager(self) -> str: ...


@dataclass(frozen=True)
class _Heard:
    written: Callable[[Write], None] | None
    replied: Callable[[Write, Any], None] | None
    ended: Callable[[Write, ApiError], None] | None


async def execute(
    plan: Plan,
    writer: Writer,
    *,
    written: Callable[[Write], None] | None = None,
    replied: Callable[[Write, Any], None] | None = None,
    ended: Callable[[Write, ApiError], None] | None = None,
) -> Result:
    """Carry out ``plan`` and return its Result, or the Result an answer ``ends`` it with.

    ``written`` hears of every write that is done (answered 2xx or a tolerated error), for the
    operator's metrics or its cache. ``replied`` hears the server's answer to every write answered
    2xx (the object as the server kept it; None for an eviction), for a caller that compares it
    with what it sent; without it, patches and deletes skip parsing their replies. ``ended`` hears
    of the write and the answer that ended the plan, for a caller that must tell the ends apart
    (in a :class:`Together`, of each such answer)."""
    heard = _Heard(written, replied, ended)
    for step in plan.steps:
        if isinstance(step, RecordEvent):
            writer.events.record(step.ref, step.type, step.reason, step.message)
            continue
        result = await (
            _together(step, writer, heard) if isinstance(step, Together) else _one(step, writer, heard)
        )
        if result is not None:
            return result
    return plan.result


async def _one(write: Write, writer: Writer, heard: _Heard) -> Result | None:
    """Send one write; a Result when its answer ends the plan."""
    try:
        reply = await _send(write, writer, want_reply=heard.replied is not None)
    except ApiError as err:
        status = 404 if _namesake(write, err) else err.status
        result = write.ends(err) if callable(write.ends) else write.ends.get(status)
        if result is not None:
            if heard.ended is not None:
                heard.ended(write, err)
            return result
        if status not in write.tolerate:
            raise
    else:
        if heard.replied is not None:
            heard.replied(write, reply)
    if heard.written is not None:
        heard.written(write)
    return None


async def _together(step: Together, writer: Writer, heard: _Heard) -> Result | None:
    semaphore = asyncio.Semaphore(step.limit)

    async def bounded(write: Write) -> Result | None:
        async with semaphore:
            return await _one(write, writer, heard)

    answers = await asyncio.gather(*(bounded(write) for write in step.writes), return_exceptions=True)
    ended: Result | None = None
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
        ended = ended or answer
    return ended


def _namesake(write: Write, err: ApiError) -> bool:
    """Whether the server refused ``write`` because the object under its name has another UID."""
    return (
        isinstance(write, Apply | Patch)
        and bool(write.uid)
        and err.status == 422
        and any(cause.get("field") == "metadata.uid" for cause in err.causes)
    )


async def _send(write: Write, writer: Writer, *, want_reply: bool) -> Any:
    client = writer.client
    if isinstance(write, Create):
        if write.field_manager:
            return await client.create(write.path, write.body, fieldManager=writer.field_manager)
        return await client.create(write.path, write.body)
    if isinstance(write, Replace):
        try:
            return await client.replace(write.path, write.body, fieldManager=writer.field_manager)
        except ApiError as refused:
            if write.resend is None:
                raise
            return await write.resend(client, writer.field_manager, write.path, write.body, refused)
    # An applied, patched or deleted object comes back in the reply, which only a caller that asked
    # for it reads: parsing, say, a pod for nothing costs CPU on every eviction and status write.
    if isinstance(write, Apply):
        manager = write.manager or writer.field_manager
        return await client.apply(write.path, write.body, manager, want_reply=want_reply)
    if isinstance(write, Patch):
        return await client.request(
            "PATCH", write.path, body=write.body, content_type=write.content_type, want_reply=want_reply
        )
    if isinstance(write, Delete):
        params = {"propagationPolicy": write.propagation} if write.propagation else None
        return await client.request(
            "DELETE", write.path, params=params, body=delete_options(write.uid), want_reply=want_reply
        )
    path = PODS.path(write.name, namespace=write.namespace, subresource="eviction")
    return await client.request("POST", path, body=_eviction(write), want_reply=False)


def _eviction(write: Evict) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": write.name, "namespace": write.namespace},
        "deleteOptions": {"preconditions": {"uid": write.uid}},
    }
