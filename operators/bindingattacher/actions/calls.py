"""Calling an action: the wire form of requests and responses, and one call with a timeout.

The wire form (spec §10.2) is the request document the webhook and exec adapters send and the
response they read back. Responses come from code the attacher does not control, so parsing
never raises: anything malformed becomes a ``TransientError`` with an explanation (so does a
number JSON has no spelling for, ``NaN``, ``Infinity`` or ``1e400``: Python reads it, but no
status write holding it could be sent), an oversized ``data`` object is dropped (with a warning
the caller turns into an Event), messages are cut to the length that conditions and events use,
and ``retryAfterSeconds`` is bounded as the core bounds a ``Retry-After`` (NaN or a negative
number is no advice, and no wait is longer than ``MAX_RETRY_AFTER_SECONDS``). A result an
in-process action returns passes the same limits; its ``data`` is measured as the client writes
it, so data it cannot write is dropped like oversized data.

:func:`invoke` runs every action the same way: the call gets ``timeout`` seconds and is then
cancelled, which counts as ``TransientError`` (the state machine turns it into
``AttachTimeout`` once the attach deadline is reached). ``PermanentActionError`` means
``PermanentError``; any other exception is ``TransientError`` with its type and text, so a bug
in a third-party action can never crash a reconcile worker. Coroutine methods are cancelled on
timeout; a plain function runs in a worker thread, which Python cannot stop, so on timeout its
late result is simply ignored (spec §10.3). Cancellation of the caller (leadership lost,
allocation gone) propagates: it is not an outcome.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.core import wirejson
from operators.core.client import bounded_retry_after
from operators.core.conditions import format_time
from operators.core.texts import ELLIPSIS, truncate_chars

from ..models import API_VERSION
from .base import AttachRequest, AttachResult, Operation, Outcome, PermanentActionError, supports_probe

MAX_MESSAGE_CHARS = 1024
MAX_DATA_BYTES = 8192
REQUEST_KIND = "AttachRequest"


def request_document(request: AttachRequest) -> dict[str, Any]:
    device = request.device
    node = request.node
    return {
        "apiVersion": API_VERSION,
        "kind": REQUEST_KIND,
        "operation": str(request.operation),
        "attachmentKey": request.attachment_key,
        "attempt": request.attempt,
        "deadline": format_time(request.deadline) if request.deadline else None,
        "timeoutSeconds": request.timeout_seconds,
        "claim": {
            "namespace": request.claim.namespace,
            "name": request.claim.name,
            "uid": request.claim.uid,
            "generation": request.claim.generation,
        },
        "allocationTimestamp": format_time(request.allocation_timestamp),
        "device": {
            "driver": device.driver,
            "pool": device.pool,
            "name": device.name,
            "shareID": device.share_id,
            "request": device.request,
            "adminAccess": device.admin_access,
            "bindingConditions": list(device.binding_conditions),
            "bindingFailureConditions": list(device.binding_failure_conditions),
            "bindsToNode": device.binds_to_node,
            "attributes": dict(device.attributes) if device.attributes is not None else None,
            "capacity": dict(device.capacity) if device.capacity is not None else None,
        },
        "node": (
            {
                "name": node.name,
                "source": node.source,
                "providerID": node.provider_id,
                "systemUUID": node.system_uuid,
                "labels": dict(node.labels),
            }
            if node is not None
            else None
        ),
        "consumers": [{"namespace": p.namespace, "name": p.name, "uid": p.uid} for p in request.consumers],
        "policy": {"name": request.policy.name, "generation": request.policy.generation},
        "previousData": dict(request.previous_data) if request.previous_data is not None else None,
        "detachReason": request.detach_reason,
    }


def encode_request(request: AttachRequest) -> bytes:
    return json.dumps(request_document(request), separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Parsed:
    result: AttachResult
    warnings: tuple[str, ...] = ()


def truncate_message(message: str) -> str:
    return truncate_chars(message, MAX_MESSAGE_CHARS, ELLIPSIS)


def transient(message: str) -> AttachResult:
    return AttachResult(Outcome.TRANSIENT_ERROR, truncate_message(message))


def check_data(data: object) -> tuple[Mapping[str, Any] | None, str | None]:
    """Accept ``data`` only as a JSON object of at most 8 KiB; otherwise drop it with a warning."""
    if data is None:
        return None, None
    if not isinstance(data, Mapping):
        return None, f"action data dropped: expected a JSON object, got {type(data).__name__}"
    try:
        size = len(wirejson.dumps(data).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        return None, f"action data dropped: not JSON-serializable ({exc})"
    if size > MAX_DATA_BYTES:
        return None, f"action data dropped: {size} bytes exceeds the {MAX_DATA_BYTES}-byte limit"
    return data, None


def normalize(result: AttachResult) -> Parsed:
    """Apply the response limits to a result, whichever adapter produced it."""
    data, warning = check_data(result.data)
    retry = bounded_retry_after(result.retry_after_seconds)
    normalized = AttachResult(result.outcome, truncate_message(result.message or ""), data, retry)
    return Parsed(normalized, (warning,) if warning else ())


def parse_response(document: object, *, default: Outcome = Outcome.SUCCEEDED) -> Parsed:
    if not isinstance(document, Mapping):
        return Parsed(transient(f"invalid response: expected a JSON object, got {type(document).__name__}"))
    raw_outcome = document.get("outcome")
    if raw_outcome is None:
        outcome = default
    else:
        try:
            outcome = Outcome(raw_outcome)
        except ValueError:
            return Parsed(transient(f"invalid response: unknown outcome {raw_outcome!r}"))
    message = document.get("message")
    retry = document.get("retryAfterSeconds")
    if isinstance(retry, bool) or not isinstance(retry, int | float):
        retry = None
    result = AttachResult(outcome, message if isinstance(message, str) else "", document.get("data"), retry)
    return normalize(result)


def parse_response_bytes(body: bytes, *, default: Outcome = Outcome.SUCCEEDED) -> Parsed:
    """Parse a body; an empty body means the default outcome with no message."""
    if not body.strip():
        return Parsed(AttachResult(default))
    try:
        document = wirejson.loads_strict(body)
    except ValueError as exc:
        return Parsed(transient(f"invalid JSON in response: {exc}"))
    return parse_response(document, default=default)


@dataclass(frozen=True)
class CallOutcome:
    result: AttachResult
    timed_out: bool = False
    warnings: tuple[str, ...] = ()
    duration_seconds: float = 0.0

    @property
    def metric_result(self) -> str:
        """The ``result`` label of ``action_calls_total``."""
        if self.timed_out:
            return "timeout"
        return {
            Outcome.SUCCEEDED: "succeeded",
            Outcome.IN_PROGRESS: "in_progress",
            Outcome.TRANSIENT_ERROR: "transient_error",
            Outcome.PERMANENT_ERROR: "permanent_error",
        }[self.result.outcome]


def _method(action: Any, operation: Operation) -> Any:
    if operation is Operation.PROBE and supports_probe(action):
        return action.probe
    if operation is Operation.DETACH:
        return action.detach
    return action.attach


def _as_result(value: object) -> Parsed:
    if isinstance(value, AttachResult):
        return normalize(value)
    if isinstance(value, Mapping):
        return parse_response(value)
    return Parsed(
        AttachResult(Outcome.TRANSIENT_ERROR, f"action returned {type(value).__name__}, not AttachResult")
    )


async def _run(method: Any, request: AttachRequest) -> object:
    if inspect.iscoroutinefunction(method):
        return await method(request)
    value = await asyncio.to_thread(method, request)
    if inspect.isawaitable(value):
        return await value
    return value


async def invoke(action: object, operation: Operation, request: AttachRequest, timeout: float) -> CallOutcome:
    """Call ``operation`` on ``action``; ``probe`` falls back to ``attach`` when unsupported."""
    method = _method(action, operation)
    started = time.monotonic()
    timed_out = False
    try:
        async with asyncio.timeout(max(timeout, 0.0)):
            parsed = _as_result(await _run(method, request))
    except TimeoutError:
        timed_out = True
        parsed = Parsed(
            AttachResult(Outcome.TRANSIENT_ERROR, f"{operation.lower()} call timed out after {timeout:g}s")
        )
    except PermanentActionError as exc:
        parsed = Parsed(AttachResult(Outcome.PERMANENT_ERROR, truncate_message(str(exc))))
    except Exception as exc:
        parsed = Parsed(
            AttachResult(Outcome.TRANSIENT_ERROR, truncate_message(f"{type(exc).__name__}: {exc}"))
        )
    return CallOutcome(parsed.result, timed_out, parsed.warnings, time.monotonic() - started)


async def close_action(action: object) -> None:
    close = getattr(action, "close", None)
    if callable(close):
        value = close()
        if inspect.isawaitable(value):
            await value
