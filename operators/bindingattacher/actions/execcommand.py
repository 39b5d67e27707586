"""Exec action (spec §10.5): runs a command with the request document on stdin.

Isolation choices, each closing a way for one call to affect another:

* argv only, no shell, and an absolute path, so the policy cannot smuggle shell syntax;
* a minimal environment (``PATH``, ``HOME``, ``LANG``, the policy's ``env`` and two
  ``DRA_OPERATORS_*`` variables), so operator credentials in the environment never leak;
* a fresh empty working directory per call, removed afterwards;
* its own process group, so that on timeout or cancellation the whole tree gets SIGTERM and,
  after a grace period, SIGKILL: a hung helper cannot outlive its call.

Exit status 0 means "read the response from stdout" (empty means Succeeded), 2 means a
permanent error, anything else (including death by signal) is transient.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence

from .base import WRITABLE_TMP_HINT, AttachRequest, AttachResult, BaseAction, Operation, Outcome
from .calls import encode_request, parse_response_bytes, transient, truncate_message

MAX_STDOUT_BYTES = 65536
STDERR_LOG_BYTES = 4096
STDERR_MESSAGE_BYTES = 512
PERMANENT_EXIT = 2
KILL_GRACE_SECONDS = 5.0
INHERITED_ENV = ("PATH", "HOME", "LANG")
RESERVED_ENV_PREFIX = "DRA_OPERATORS_"

logger = logging.getLogger(__name__)


def command_problem(command: Sequence[str]) -> tuple[str, str] | None:
    """``(reason, message)`` when the command cannot be used, else None."""
    if not command:
        return "InvalidActionConfig", "spec.action.exec.command: at least one entry is required"
    path = command[0]
    if not os.path.isabs(path):
        return "InvalidActionConfig", f"spec.action.exec.command[0]: {path!r} must be an absolute path"
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return "CommandNotFound", f"spec.action.exec.command[0]: {path!r} does not exist or is not executable"
    return None


def _stderr_text(stderr: bytes, limit: int) -> str:
    return stderr[:limit].decode("utf-8", errors="replace").strip()


class ExecAction(BaseAction):
    probe_enabled = True

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        kill_grace_seconds: float = KILL_GRACE_SECONDS,
    ) -> None:
        self.command = tuple(command)
        self.env = dict(env or {})
        self.kill_grace_seconds = kill_grace_seconds

    async def attach(self, request: AttachRequest) -> AttachResult:
        return await self.run(Operation.ATTACH, request)

    async def probe(self, request: AttachRequest) -> AttachResult:
        return await self.run(Operation.PROBE, request)

    async def detach(self, request: AttachRequest) -> AttachResult:
        return await self.run(Operation.DETACH, request)

    def environment(self, operation: Operation, request: AttachRequest) -> dict[str, str]:
        env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
        env.update(self.env)
        env["DRA_OPERATORS_OPERATION"] = operation.lower()
        env["DRA_OPERATORS_ATTACHMENT_KEY"] = request.attachment_key
        return env

    async def run(self, operation: Operation, request: AttachRequest) -> AttachResult:
        try:
            workdir = tempfile.mkdtemp(prefix="dra-operators-exec-")
        except OSError as exc:
            # A read-only root filesystem without a writable /tmp: say what to mount.
            return transient(f"no working directory for {self.command[0]}: {exc}; {WRITABLE_TMP_HINT}")
        try:
            return await self._run_in(workdir, operation, request)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    async def _run_in(self, workdir: str, operation: Operation, request: AttachRequest) -> AttachResult:
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                env=self.environment(operation, request),
                start_new_session=True,
            )
        except OSError as exc:
            return transient(f"cannot start {self.command[0]}: {exc}")
        try:
            stdout, stderr = await process.communicate(encode_request(request))
        except BaseException:
            # Timeout (the caller cancels us) or shutdown: take the whole process group down.
            await self._terminate(process)
            raise
        if stderr:
            logger.info(
                "exec action stderr",
                extra={"command": self.command[0], "stderr": _stderr_text(stderr, STDERR_LOG_BYTES)},
            )
        return self._result(process.returncode, stdout, stderr)

    def _result(self, returncode: int | None, stdout: bytes, stderr: bytes) -> AttachResult:
        if len(stdout) > MAX_STDOUT_BYTES:
            return transient(f"{self.command[0]}: stdout exceeds {MAX_STDOUT_BYTES} bytes")
        detail = _stderr_text(stderr, STDERR_MESSAGE_BYTES)
        if returncode == 0:
            return parse_response_bytes(stdout).result
        if returncode == PERMANENT_EXIT:
            message = ""
            with contextlib.suppress(ValueError):
                document = json.loads(stdout) if stdout.strip() else None
                if isinstance(document, dict) and isinstance(document.get("message"), str):
                    message = document["message"]
            return AttachResult(
                Outcome.PERMANENT_ERROR,
                truncate_message(message or detail or f"{self.command[0]} exited with 2"),
            )
        if returncode is not None and returncode < 0:
            what = f"killed by signal {signal.Signals(-returncode).name}"
        else:
            what = f"exited with {returncode}"
        return transient(f"{self.command[0]} {what}" + (f": {detail}" if detail else ""))

    async def _terminate(self, process: asyncio.subprocess.Process) -> None:
        if process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(process.wait()), self.kill_grace_seconds)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(process.wait())
