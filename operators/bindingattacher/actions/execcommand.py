"""Exec action (spec §10.5): runs a command with the request document on stdin.

Who may create a DeviceAttachPolicy decides what runs as the attacher, so the attacher runs only
commands of its operator's choosing: the files of ``--exec-commands-dir`` (a ConfigMap mounted
into the Deployment), symlinks resolved; a policy that names anything else, or any command where
no directory is configured, is refused with ``Ready=False``. Environment names that change how a
shell, the dynamic linker or an interpreter starts (``BASH_ENV``, ``LD_PRELOAD``, ``PYTHONPATH``,
...) are refused too, so a permitted command cannot be made to run other code.

Isolation choices, each closing a way for one call to affect another:

* argv only, no shell, and an absolute path, so the policy cannot smuggle shell syntax;
* a minimal environment (``PATH``, ``HOME``, ``LANG``, the policy's ``env`` and two
  ``DRA_OPERATORS_*`` variables), so operator credentials in the environment never leak;
* a fresh empty working directory per call, removed afterwards;
* its own process group, so that on timeout or cancellation the whole tree gets SIGTERM and,
  after a grace period, SIGKILL: a hung helper cannot outlive its call; and once the command
  exits, whatever it left running in its group (a daemon it forked) is killed too;
* stdout and stderr read as streams: only the first ``MAX_STDOUT_BYTES`` and
  ``STDERR_LOG_BYTES`` are kept and the rest is read and dropped, so a helper that floods its
  output costs neither memory nor a blocked pipe. (A helper that leaves its process group with
  ``setsid`` escapes all of this; the image's init, tini, reaps what it leaves when it exits.)

Exit status 0 means "read the response from stdout" (empty means Succeeded), 2 means a
permanent error, anything else (including death by signal) is transient.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence

from operators.core import wirejson

from .base import WRITABLE_TMP_HINT, AttachRequest, AttachResult, BaseAction, Operation, Outcome
from .calls import encode_request, parse_response_bytes, transient, truncate_message

MAX_STDOUT_BYTES = 65536
STDERR_LOG_BYTES = 4096
READ_CHUNK = 65536
# How long the output pipes may stay open once the command has exited.
DRAIN_SECONDS = 2.0
EXIT_POLL_SECONDS = 0.02
STDERR_MESSAGE_BYTES = 512
PERMANENT_EXIT = 2
KILL_GRACE_SECONDS = 5.0
INHERITED_ENV = ("PATH", "HOME", "LANG")
RESERVED_ENV_PREFIX = "DRA_OPERATORS_"
# Names that make a shell, the dynamic linker or an interpreter load code of the policy's choosing.
DANGEROUS_ENV = re.compile(
    r"^(BASH_ENV|ENV|SHELLOPTS|BASHOPTS|PS4|IFS|PATH|LD_.*|GCONV_PATH|PYTHON.*|PERL5?LIB|PERL5OPT|RUBYLIB|RUBYOPT"
    r"|NODE_OPTIONS|NODE_PATH|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|BASH_FUNC_.*)$"
)
NOT_CONFIGURED = (
    "ExecNotConfigured",
    "spec.action.exec: this attacher runs no Exec command: its operator has not given it a directory of "
    "allowed commands (--exec-commands-dir, a ConfigMap mounted into the Deployment; "
    'docs/install.md, "Exec actions run only your commands")',
)

logger = logging.getLogger(__name__)


def command_problem(command: Sequence[str], allowed_dir: str) -> tuple[str, str] | None:
    """``(reason, message)`` when the command cannot be used, else None. ``allowed_dir`` is
    ``--exec-commands-dir`` ("" where the operator configured none)."""
    if not command:
        return "InvalidActionConfig", "spec.action.exec.command: at least one entry is required"
    path = command[0]
    if not os.path.isabs(path):
        return "InvalidActionConfig", f"spec.action.exec.command[0]: {path!r} must be an absolute path"
    if not allowed_dir:
        return NOT_CONFIGURED
    allowed = os.path.realpath(allowed_dir)
    resolved = os.path.realpath(path)
    if os.path.commonpath([allowed, resolved]) != allowed or resolved == allowed:
        return (
            "CommandNotAllowed",
            f"spec.action.exec.command[0]: {path!r} is not one of the attacher's allowed commands; its "
            f"operator allows the files of {allowed_dir} (--exec-commands-dir)",
        )
    if not os.path.isfile(resolved) or not os.access(resolved, os.X_OK):
        return "CommandNotFound", f"spec.action.exec.command[0]: {path!r} does not exist or is not executable"
    return None


def env_problem(name: str) -> str | None:
    """Why a policy may not set this variable, or None."""
    if name.startswith(RESERVED_ENV_PREFIX):
        return f"names starting with {RESERVED_ENV_PREFIX} are reserved"
    if DANGEROUS_ENV.fullmatch(name):
        return "it changes how a shell, the dynamic linker or an interpreter starts"
    return None


async def _exited(process: asyncio.subprocess.Process) -> None:
    """Until the command itself has exited. ``Process.wait()`` also waits for its pipes to close,
    which a process it left running may keep open for ever."""
    # No event to wait for: asyncio sets the exit status without telling anyone but wait().
    while process.returncode is None:  # noqa: ASYNC110
        await asyncio.sleep(EXIT_POLL_SECONDS)


async def _read_capped(stream: asyncio.StreamReader | None, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of a stream, read to its end; whether more came."""
    if stream is None:
        return b"", False
    kept = bytearray()
    more = False
    while chunk := await stream.read(READ_CHUNK):
        room = limit - len(kept)
        if len(chunk) > room:
            more = True
        kept += chunk[: max(room, 0)]
    return bytes(kept), more


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
        output = asyncio.gather(
            _read_capped(process.stdout, MAX_STDOUT_BYTES), _read_capped(process.stderr, STDERR_LOG_BYTES)
        )
        try:
            await self._feed(process, encode_request(request))
            await _exited(process)
            # What the command left running in its group goes with it, and so do the pipes the
            # leftovers held open.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            try:
                (stdout, flooded), (stderr, _) = await asyncio.wait_for(asyncio.shield(output), DRAIN_SECONDS)
            except TimeoutError:
                # A leftover that left the group (setsid) still holds a pipe.
                output.cancel()
                return transient(f"{self.command[0]} left a process behind that holds its output open")
        except BaseException:
            # Timeout (the caller cancels us) or shutdown: take the whole process group down.
            output.cancel()
            await self._terminate(process)
            raise
        if stderr:
            logger.info(
                "exec action stderr",
                extra={"command": self.command[0], "stderr": _stderr_text(stderr, STDERR_LOG_BYTES)},
            )
        if flooded:
            return transient(f"{self.command[0]}: stdout exceeds {MAX_STDOUT_BYTES} bytes")
        return self._result(process.returncode, stdout, stderr)

    @staticmethod
    async def _feed(process: asyncio.subprocess.Process, document: bytes) -> None:
        if process.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(document)
            await process.stdin.drain()
        process.stdin.close()

    def _result(self, returncode: int | None, stdout: bytes, stderr: bytes) -> AttachResult:
        detail = _stderr_text(stderr, STDERR_MESSAGE_BYTES)
        if returncode == 0:
            return parse_response_bytes(stdout).result
        if returncode == PERMANENT_EXIT:
            message = ""
            with contextlib.suppress(ValueError):
                document = wirejson.loads_strict(stdout) if stdout.strip() else None
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
