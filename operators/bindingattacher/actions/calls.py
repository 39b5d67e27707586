"""Running one action call with a timeout, and mapping whatever happens onto an outcome.

The attacher treats every adapter the same way: the call gets ``timeout`` seconds and is then
cancelled, which counts as ``TransientError`` (the state machine turns it into
``AttachTimeout`` once the attach deadline is reached). ``PermanentActionError`` means
``PermanentError``; any other exception is ``TransientError`` with its type and text, so a bug
in a third-party action can never crash a reconcile worker.

Coroutine methods are cancelled on timeout. A plain function runs in a worker thread; Python
cannot stop a thread, so on timeout its late result is simply ignored (spec §10.3).

Cancellation of the caller (leadership lost, allocation gone) propagates: it is not an outcome.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .base import AttachRequest, AttachResult, Operation, Outcome, PermanentActionError, supports_probe
from .document import Parsed, normalize, parse_response, truncate_message


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
