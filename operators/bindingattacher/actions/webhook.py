"""HTTPS webhook action (spec §10.4).

``POST <url>/attach``, ``/detach`` and, when enabled, ``/probe`` with the request document as
the body and the attachment key as ``Idempotency-Key``.

Transport rules, chosen so that a misconfigured or hostile network cannot fake an attachment:

* the server certificate and host name are always verified; there is no switch to turn that
  off. Trust comes from the policy's CA bundle (inline or from a Secret) or the system store;
* TLS 1.2 is the minimum; an optional client certificate gives mTLS;
* redirects are not followed and proxy environment variables are ignored, so the request goes
  exactly where the policy says;
* response bodies are read up to 64 KiB.

The per-call timeout is enforced by :func:`~.calls.invoke`; the adapter itself only bounds
the connect phase. One ``aiohttp`` session per action instance keeps connections pooled,
sized for the policy's attach plus detach concurrency.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from operators.core.client import retry_after_seconds

from .base import (
    WRITABLE_TMP_HINT,
    ActionConfigError,
    AttachRequest,
    AttachResult,
    BaseAction,
    Operation,
    Outcome,
)
from .calls import encode_request, parse_response_bytes, transient, truncate_message

MAX_BODY_BYTES = 65536
TRANSIENT_STATUSES = frozenset({401, 408, 409, 423, 429})


def ssl_context(
    ca_pem: str | None = None, client_cert_pem: str | None = None, client_key_pem: str | None = None
) -> ssl.SSLContext:
    """A verifying TLS ≥ 1.2 client context; raises ActionConfigError for unusable PEM."""
    try:
        context = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()
    except (ssl.SSLError, ValueError) as exc:
        raise ActionConfigError("InvalidActionConfig", f"CA bundle is not valid PEM: {exc}") from exc
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    if client_cert_pem or client_key_pem:
        if not (client_cert_pem and client_key_pem):
            raise ActionConfigError(
                "InvalidActionConfig", "client certificate needs both tls.crt and tls.key"
            )
        _load_client_cert(context, client_cert_pem, client_key_pem)
    return context


def _load_client_cert(context: ssl.SSLContext, cert_pem: str, key_pem: str) -> None:
    # The ssl module loads key material only from files; keep them private and short-lived.
    try:
        directory_handle = tempfile.TemporaryDirectory(prefix="dra-operators-mtls-")
    except OSError as exc:
        raise ActionConfigError(
            "InvalidActionConfig", f"cannot stage the client certificate: {exc}; {WRITABLE_TMP_HINT}"
        ) from exc
    with directory_handle as directory:
        cert_path = os.path.join(directory, "tls.crt")
        key_path = os.path.join(directory, "tls.key")
        for path, content in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(content)
        try:
            context.load_cert_chain(cert_path, key_path)
        except (ssl.SSLError, ValueError) as exc:
            raise ActionConfigError(
                "InvalidActionConfig", f"client certificate is not usable: {exc}"
            ) from exc


def shown_url(url: str) -> str:
    """The URL as messages and conditions show it: without user information (a password)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparsable URL)"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return parts._replace(netloc=f"***@{netloc}").geturl()


def check_url(url: str, allow_insecure_http: bool, operator_allows_insecure: bool = False) -> str | None:
    """The problem with a webhook URL, or None. Plain HTTP needs the policy's allowInsecureHTTP and
    the operator's --allow-insecure-webhooks; so do credentials in the URL."""
    shown = shown_url(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises only when read
    except ValueError as exc:
        return f"spec.action.webhook.url: {shown!r} does not parse: {exc}"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return f"spec.action.webhook.url: {shown!r} must be an absolute https:// URL"
    if parts.scheme == "http" and not allow_insecure_http:
        return (
            f"spec.action.webhook.url: {shown!r} uses plain http; set allowInsecureHTTP only on test clusters"
        )
    if parts.scheme == "http" and not operator_allows_insecure:
        return (
            f"spec.action.webhook.url: {shown!r} uses plain http, which this attacher's operator does not "
            "allow (--allow-insecure-webhooks)"
        )
    if (parts.username is not None or parts.password is not None) and not operator_allows_insecure:
        return (
            f"spec.action.webhook.url: {shown!r} carries credentials; use bearerTokenSecretRef or a client "
            "certificate (credentials in a URL need the operator's --allow-insecure-webhooks)"
        )
    if parts.query or parts.fragment:
        return f"spec.action.webhook.url: {shown!r} must not have a query or fragment"
    return None


def _error_message(status: int, reason: str, body: bytes) -> str:
    parsed = parse_response_bytes(body)
    if parsed.result.outcome is not Outcome.TRANSIENT_ERROR and parsed.result.message:
        return f"HTTP {status}: {parsed.result.message}"
    return truncate_message(f"HTTP {status} {reason}".strip())


def result_for_response(status: int, reason: str, headers: Mapping[str, str], body: bytes) -> AttachResult:
    """Map an HTTP response onto an outcome (the table in spec §10.4)."""
    if status in (200, 201, 204):
        return parse_response_bytes(body).result
    if status == 202:
        parsed = parse_response_bytes(body, default=Outcome.IN_PROGRESS).result
        retry = (
            parsed.retry_after_seconds
            if parsed.retry_after_seconds is not None
            else retry_after_seconds(headers.get("Retry-After"))
        )
        return AttachResult(Outcome.IN_PROGRESS, parsed.message, parsed.data, retry)
    if status in TRANSIENT_STATUSES:
        return AttachResult(
            Outcome.TRANSIENT_ERROR,
            _error_message(status, reason, body),
            None,
            retry_after_seconds(headers.get("Retry-After")),
        )
    if 300 <= status < 400:
        return AttachResult(Outcome.PERMANENT_ERROR, f"HTTP {status}: redirects are not followed")
    if 400 <= status < 500:
        return AttachResult(Outcome.PERMANENT_ERROR, _error_message(status, reason, body))
    return AttachResult(Outcome.TRANSIENT_ERROR, _error_message(status, reason, body))


@dataclass(frozen=True)
class WebhookSettings:
    url: str
    ssl_context: ssl.SSLContext | None
    """None only for plain http (``allowInsecureHTTP``)."""
    server_name: str | None = None
    bearer_token: str | None = None
    connect_timeout: float = 5.0
    probe: bool = False
    pool_size: int = 30


class WebhookAction(BaseAction):
    def __init__(self, settings: WebhookSettings) -> None:
        self.settings = settings
        self.probe_enabled = settings.probe
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.settings.pool_size, ssl=self.settings.ssl_context or False
            )
            timeout = aiohttp.ClientTimeout(
                total=None, connect=self.settings.connect_timeout, sock_connect=self.settings.connect_timeout
            )
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False)
        return self._session

    async def attach(self, request: AttachRequest) -> AttachResult:
        return await self._post(Operation.ATTACH, request)

    async def probe(self, request: AttachRequest) -> AttachResult:
        return await self._post(Operation.PROBE, request)

    async def detach(self, request: AttachRequest) -> AttachResult:
        return await self._post(Operation.DETACH, request)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _post(self, operation: Operation, request: AttachRequest) -> AttachResult:
        headers = {"Content-Type": "application/json", "Idempotency-Key": request.attachment_key}
        if self.settings.bearer_token:
            headers["Authorization"] = f"Bearer {self.settings.bearer_token}"
        url = self.settings.url.rstrip("/") + "/" + operation.lower()
        options: dict[str, Any] = {"allow_redirects": False}
        if self.settings.server_name:
            options["server_hostname"] = self.settings.server_name
        try:
            async with self._client().post(
                url, data=encode_request(request), headers=headers, **options
            ) as response:
                body = await _read_limited(response.content, MAX_BODY_BYTES + 1)
                if len(body) > MAX_BODY_BYTES:
                    return transient(f"HTTP {response.status}: response body exceeds {MAX_BODY_BYTES} bytes")
                return result_for_response(response.status, response.reason or "", response.headers, body)
        except (aiohttp.ClientError, ssl.SSLError, OSError, TimeoutError) as exc:
            message = str(exc).replace(url, shown_url(url))
            return transient(
                f"{operation.lower()} request to {shown_url(url)} failed: {type(exc).__name__}: {message}"
            )


async def _read_limited(stream: aiohttp.StreamReader, limit: int) -> bytes:
    body = bytearray()
    while len(body) < limit:
        chunk = await stream.read(limit - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)


def secret_value(secrets: Mapping[str, Mapping[str, str]], name: str, key: str, field_path: str) -> str:
    """A decoded Secret value from the operator namespace, or SecretNotFound."""
    data = secrets.get(name)
    if data is None:
        raise ActionConfigError(
            "SecretNotFound", f"{field_path}: Secret {name!r} not found in the operator namespace"
        )
    value = data.get(key)
    if value is None:
        raise ActionConfigError("SecretNotFound", f"{field_path}: Secret {name!r} has no key {key!r}")
    return value
