"""The one Kubernetes API client of the project.

kubernetes-asyncio loads the credentials (kubeconfig or in-cluster service account, with
token refresh; found in kubectl's places by :mod:`.credentials`) and owns the aiohttp session;
requests go through its ``ApiClient`` as raw JSON, because the operators read only a few
fields of each object and the generated model classes would cost memory and time for nothing.

Every request passes the client-side token bucket (``--kube-api-qps``/``--kube-api-burst``,
20/30 by default like kube-controller-manager). Like kube-controller-manager, which gives
each controller, the shared informers and the event broadcaster a client of their own,
the runtime makes :meth:`KubeClient.sibling` clients for listing and for Events: same
session, own bucket, so reads and diagnostics never slow the controller's writes.

A 429 that means "busy" is retried here, no sooner than its ``Retry-After`` (read by
:func:`retry_after_seconds`, which bounds it), a bounded number of times, as client-go does; a
429 that answers the request (a PodDisruptionBudget's refusal) and other errors are raised as
:class:`ApiError` for the work queue to retry with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import enum
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from aiohttp.http_exceptions import LineTooLong
from kubernetes_asyncio import client as k8s_client
from yarl import URL

from . import protowire, wirejson
from .credentials import load_credentials, locate_credentials
from .metrics import client_request_done, write_refused
from .ratelimit import TokenBucket

log = logging.getLogger(__name__)

JSON = "application/json"
# Lists of metadata only: cheap to send and to parse when names and UIDs are all that count.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

MAX_THROTTLE_RETRIES = 10
# HTTP/1.1 answers one request per connection at a time, and each TLS connection holds a
# 128 KiB read buffer here (and a goroutine on the server); client-go multiplexes everything
# over one HTTP/2 connection. Measured on 1000 template pods, unthrottled: 20 connections took
# 7.4 s, 50 took 6.5 s (as many as resourceclaim's workers); the library's default is 100.
MAX_CONNECTIONS = 50
TLS_CLOSE_GRACE_SECONDS = 0.25
# sock_connect, not connect: aiohttp's connect timeout also counts the wait for a free pooled
# connection, which under a burst is queueing, not a failure.
DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=60, sock_connect=5, sock_read=30)


class Answer(enum.StrEnum):
    """What an API error means to the writer, whatever was written: the one table every controller
    starts from before adding what its own spec reads in the message (bindingattacher's missing
    driver permission, poolstatus's fallback status).

    ============================  ==========================================================
    status                        meaning
    ============================  ==========================================================
    404                           ``GONE``: the object (or its namespace) is not there
    409                           ``CONFLICT``: it changed since it was read, or it exists
    400, 413, 422                 ``INVALID``: the server refuses this content; resending it
                                  cannot help
    0 (no answer), 408, 429, 5xx  ``TRANSIENT``: the same request may succeed later
    any other (401, 403, 405...)  ``REFUSED``: the server refuses the caller or the request's
                                  form; only a change outside the operator (credentials, RBAC,
                                  an upgrade) can help
    ============================  ==========================================================
    """

    GONE = "gone"
    CONFLICT = "conflict"
    INVALID = "invalid"
    TRANSIENT = "transient"
    REFUSED = "refused"


def answer_of(status: int) -> Answer:
    if status == 404:
        return Answer.GONE
    if status == 409:
        return Answer.CONFLICT
    if status in (400, 413, 422):
        return Answer.INVALID
    if status in (0, 408, 429) or status >= 500:
        return Answer.TRANSIENT
    return Answer.REFUSED


class ApiError(Exception):
    """A non-2xx answer of kube-apiserver, or a transport failure (status 0)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        retry_after: float | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.body = dict(body or {})

    @property
    def answer(self) -> Answer:
        return answer_of(self.status)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def busy(self) -> bool:
        """A 429 that means "not now" (API Priority and Fairness, a rate limit), not a 429 that
        answers the request: the Eviction API refuses a pod its PodDisruptionBudget protects with
        a 429 whose Status names the budget in ``details.causes``; retrying that here would only
        hide the refusal from its caller and spend the request budget."""
        return self.status == 429 and not self.causes

    @property
    def causes(self) -> list[Mapping[str, Any]]:
        """The Status's ``details.causes``: what the server found wrong, each with its ``reason``,
        ``message`` and, for an invalid field, the ``field``."""
        details = self.body.get("details")
        causes = details.get("causes") if isinstance(details, Mapping) else None
        return [c for c in causes if isinstance(c, Mapping)] if isinstance(causes, list) else []

    @property
    def retryable(self) -> bool:
        """Worth sending again as it is: after a pause, or after reading the object again (409)."""
        return self.answer in (Answer.TRANSIENT, Answer.CONFLICT)


def delete_options(uid: str | None = None) -> dict[str, Any]:
    """The body of a DELETE; with ``uid``, the API server deletes only the object with that UID."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if uid is not None:
        body["preconditions"] = {"uid": uid}
    return body


MAX_RETRY_AFTER_SECONDS = 1000.0
"""The longest wait a server's ``Retry-After`` (or a webhook's ``retryAfterSeconds``) can impose:
the work queue's longest failure backoff (client-go's 1000 s). A key then comes back at least as
often as a failing one, whatever a third party asks for; waiting longer would silence it."""

# RFC 9110's delay-seconds, plus a decimal fraction (a webhook's retryAfterSeconds may have one):
# no sign, no exponent, no "inf" or "nan", ASCII digits only; float() would take all of these.
_DELAY_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def retry_after_seconds(value: str | None) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait, at most :data:`MAX_RETRY_AFTER_SECONDS`;
    None when there is none or it does not read as a number of seconds, and then the caller's own
    backoff applies. As in client-go, the HTTP-date form is not read, and a negative number asks
    for no wait (client-go sleeps it as zero)."""
    if value is None or not _DELAY_SECONDS.fullmatch(value.strip()):
        return None
    return bounded_retry_after(float(value))


def bounded_retry_after(seconds: float | None) -> float | None:
    """A wait someone else asked for, as a delay the work queue can keep: None for a negative one or
    NaN (no advice), at most :data:`MAX_RETRY_AFTER_SECONDS` (infinity included)."""
    if seconds is None or not seconds >= 0:
        return None
    return float(min(seconds, MAX_RETRY_AFTER_SECONDS))


def _no_response(method: str, err: Exception) -> ApiError:
    """A request that got no answer (a timeout, a refused or dropped connection), counted as such."""
    client_request_done(method, "error")
    return ApiError(0, type(err).__name__, str(err) or type(err).__name__)


def _parsed(raw: bytes) -> Any:
    try:
        return wirejson.loads(raw) if raw else None
    except wirejson.TooDeep:
        # JSON all the same, and what it holds matters: a list page is not to be read as empty.
        raise
    except ValueError:
        # Some answers are plain text, e.g. API Priority and Fairness' 429 "Too many requests".
        return None


def _api_error(status: int, raw: bytes, parsed: Any, retry_after: float | None) -> ApiError:
    if isinstance(parsed, dict):
        return ApiError(status, parsed.get("reason", ""), parsed.get("message", ""), retry_after, parsed)
    return ApiError(status, "", raw.decode(errors="replace"), retry_after)


def _proxy_for(configuration: k8s_client.Configuration) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The configured proxy, else the one $HTTPS_PROXY/$NO_PROXY give for the API server."""
    if configuration.proxy:
        return str(configuration.proxy), None
    try:
        proxy, auth = get_env_proxy_for_url(URL(str(configuration.host)))
    except LookupError:
        return None, None
    return str(proxy), auth


async def load_configuration(kubeconfig: str | None, context: str | None = None) -> k8s_client.Configuration:
    """Credentials as :func:`~.credentials.locate_credentials` finds them (``kubeconfig`` is
    ``--kubeconfig``); a :class:`~.settings.ConfigurationError` when none can be used. Tests that
    run several identities in one process pass each one's kubeconfig explicitly, which wins."""
    configuration = k8s_client.Configuration()
    configuration.connection_pool_maxsize = MAX_CONNECTIONS
    await load_credentials(locate_credentials(kubeconfig, context=context), configuration, context)
    return configuration


WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class WriteFence:
    """Shared by a client and its siblings: once closed, none of them sends a write (the
    coexistence guard). Clients made with ``own_fence`` (Events, the Lease) keep writing."""

    def __init__(self) -> None:
        self.reason = ""

    def close(self, reason: str) -> None:
        """Closed once, for good: the first reason (the guard's verdict, a lost Lease) stays the
        one every refused write names."""
        if not self.reason:
            self.reason = reason


class KubeClient:
    # aiohttp refuses a line longer than twice its read buffer: a watch event is one line, and the
    # largest object etcd stores (1.5 MiB) can grow sixfold in JSON (Go writes `<` as \u003c).
    # A tenant's pod of that size had stopped the pod watch.
    read_buffer = 2**23

    def __init__(
        self,
        configuration: k8s_client.Configuration,
        qps: float = 20,
        burst: int = 30,
        user_agent: str = "dra-operators",
        on_success: Callable[[], None] | None = None,
    ) -> None:
        self.configuration = configuration
        self.api = k8s_client.ApiClient(configuration)
        self.api.user_agent = user_agent
        # Sent on every request: kube-apiserver names the field manager of a write without one
        # after the part before its first "/" (aiohttp's own agent would make that "Python").
        self.user_agent = user_agent
        # kubernetes-asyncio's session trusts the environment, which makes aiohttp look up
        # ~/.netrc and the proxy variables in a worker thread on every request. Resolve the
        # proxy once instead, and share the library's connector (TLS context, pool).
        self.proxy, self.proxy_auth = _proxy_for(configuration)
        self.session = aiohttp.ClientSession(
            connector=self.api.rest_client.pool_manager.connector,
            connector_owner=False,
            read_bufsize=self.read_buffer,
        )
        self.bucket = TokenBucket(qps, burst)
        self._on_success = on_success
        self._owner: KubeClient | None = None
        # Shared with the siblings (a shallow copy keeps the object): see stop_waiting().
        self._stopping = asyncio.Event()
        self.fence = WriteFence()
        self.requests_total = 0

    def sibling(self, *, outlives_stop: bool = False, own_fence: bool = False) -> KubeClient:
        """A client on the same session and credentials with a token bucket of its own.
        ``outlives_stop``: :meth:`stop_waiting` of this client does not stop it (for the
        shutdown's own last writes, such as releasing the Lease). ``own_fence``: closing this
        client's :class:`WriteFence` does not stop its writes (Events, leader election)."""
        twin = copy.copy(self)
        twin.bucket = TokenBucket(self.bucket.qps, self.bucket.burst)
        if outlives_stop:
            twin._stopping = asyncio.Event()
        if own_fence:
            twin.fence = WriteFence()
        twin._owner = self
        twin.requests_total = 0
        return twin

    def stop_waiting(self) -> None:
        """On shutdown: no new request is sent, and those waiting for a token or a Retry-After fail
        at once, so the running syncs end within the grace period instead of sleeping through it. A
        sibling made with ``outlives_stop`` (Events, the Lease) goes on."""
        self._stopping.set()

    async def _stopped_within(self, delay: float) -> bool:
        if self._stopping.is_set():
            return True
        if delay <= 0:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), delay)
        return self._stopping.is_set()

    @classmethod
    async def from_kubeconfig(cls, kubeconfig: str | None, **kwargs: Any) -> KubeClient:
        return cls(await load_configuration(kubeconfig), **kwargs)

    async def close(self) -> None:
        if self._owner is None:
            await self.session.close()
            await self.api.close()
            if self.server.startswith("https://"):
                # TLS connections finish their close_notify exchange on the loop after the
                # session closed; a loop closed at once leaves them open (aiohttp's advice).
                await asyncio.sleep(TLS_CLOSE_GRACE_SECONDS)

    @property
    def server(self) -> str:
        return str(self.configuration.host)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: aiohttp.ClientTimeout = DEFAULT_TIMEOUT,
        accept: str = JSON,
        want_reply: bool = True,
    ) -> Any:
        """The parsed answer; None for an empty one, or when ``want_reply`` is False (a caller
        that ignores the returned object saves parsing it, e.g. the pod a DELETE returns)."""
        for attempt in range(MAX_THROTTLE_RETRIES + 1):
            try:
                return await self._request_once(
                    method, path, params, body, content_type, timeout, accept, want_reply
                )
            except ApiError as err:
                if not err.busy or attempt == MAX_THROTTLE_RETRIES:
                    raise
                delay = err.retry_after if err.retry_after is not None else 1.0
                log.info("throttled by the API server (429) on %s %s; retrying in %.1fs", method, path, delay)
                if await self._stopped_within(delay):
                    raise
        raise AssertionError("unreachable")

    async def _request_once(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        timeout: aiohttp.ClientTimeout,
        accept: str,
        want_reply: bool = True,
    ) -> Any:
        self._check_fence(method, path)
        if await self._stopped_within(self.bucket.reserve()):
            raise ApiError(0, "ShuttingDown", f"{method} {path} not sent: the operator is stopping")
        self.requests_total += 1
        headers = {"Content-Type": content_type, "Accept": accept, "User-Agent": self.user_agent}
        # Authentication (bearer token with refresh) comes from kubernetes-asyncio; the body is
        # sent as is, because ApiClient would re-serialise it through its model classes, and
        # written as Go writes JSON, because kube-apiserver compares raw parameters byte for byte.
        await self.api.update_params_for_auth(headers, [], ["BearerToken"])
        # Again, just before sending: the Lease may have been lost while this write waited for its
        # token or its credentials.
        self._check_fence(method, path)
        data = None if body is None else body if isinstance(body, (bytes, str)) else wirejson.dumps(body)
        try:
            async with self._send(
                method, path, params=dict(params or {}), headers=headers, data=data, timeout=timeout
            ) as response:
                raw = await response.read()
                status = response.status
                retry_after = retry_after_seconds(response.headers.get("Retry-After"))
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            raise _no_response(method, err) from err
        client_request_done(method, str(status))
        succeeded = 200 <= status < 300
        if succeeded and self._on_success is not None:
            self._on_success()
        if succeeded and not want_reply:
            return None
        if succeeded and accept == protowire.CONTENT_TYPE:
            return raw
        parsed = _parsed(raw)
        if succeeded:
            return parsed
        raise _api_error(status, raw, parsed, retry_after)

    def _check_fence(self, method: str, path: str) -> None:
        if self.fence.reason and method in WRITES:
            write_refused(method)
            raise ApiError(0, "WriteRefused", f"{method} {path} not sent: {self.fence.reason}")

    async def watch_lines(
        self, path: str, params: Mapping[str, str], timeout_seconds: int
    ) -> AsyncIterator[bytes]:
        """The lines of a watch response (one JSON event each), as the server sends them.

        The request passes the token bucket like any other; the stream then stays open until the
        server ends it (``timeoutSeconds``), the connection drops (raised as :class:`ApiError`
        with status 0), or the caller stops iterating. A non-2xx answer is raised at once."""
        if await self._stopped_within(self.bucket.reserve()):
            raise ApiError(0, "ShuttingDown", f"watch {path} not started: the operator is stopping")
        self.requests_total += 1
        headers = {"Accept": JSON, "User-Agent": self.user_agent}
        await self.api.update_params_for_auth(headers, [], ["BearerToken"])
        # No total timeout: the server ends the watch; a silent connection is caught by sock_read
        # (bookmarks arrive about every minute, and the server's timeout bounds the stream).
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=timeout_seconds + 60)
        query = {**params, "watch": "true", "timeoutSeconds": str(timeout_seconds)}
        try:
            async with self._send("GET", path, params=query, headers=headers, timeout=timeout) as response:
                client_request_done("WATCH", str(response.status))
                if response.status != 200:
                    raw = await response.read()
                    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
                    raise _api_error(response.status, raw, _parsed(raw), retry_after)
                if self._on_success is not None:
                    self._on_success()
                while True:
                    try:
                        line = await response.content.readline()
                    except LineTooLong as err:
                        raise ValueError(f"a watch event longer than the read buffer: {err}") from None
                    if not line:
                        return
                    if line.strip():
                        yield line
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            raise _no_response("WATCH", err) from err

    def _send(
        self, method: str, path: str, **options: Any
    ) -> contextlib.AbstractAsyncContextManager[aiohttp.ClientResponse]:
        """The aiohttp request, through the proxy resolved once at start (no per-request lookup)."""
        return self.session.request(
            method, self.server + path, proxy=self.proxy, proxy_auth=self.proxy_auth, **options
        )

    async def get(self, path: str, **params: str) -> Any:
        return await self.request("GET", path, params=params)

    async def get_protobuf(self, path: str) -> bytes:
        """The object as kube-apiserver stores it, in its protobuf envelope (:mod:`.protowire`)."""
        raw: bytes = await self.request("GET", path, accept=protowire.CONTENT_TYPE)
        return raw

    async def replace_protobuf(self, path: str, envelope: bytes, **params: str) -> Any:
        """A PUT of a protobuf envelope; the answer is read as JSON."""
        return await self.request(
            "PUT", path, params=params, body=envelope, content_type=protowire.CONTENT_TYPE
        )

    async def list_metadata(self, path: str, **params: str) -> Any:
        return await self.request("GET", path, params=params, accept=METADATA_LIST)

    async def create(self, path: str, body: Mapping[str, Any], **params: str) -> Any:
        return await self.request("POST", path, params=params, body=body)

    async def replace(self, path: str, body: Mapping[str, Any], **params: str) -> Any:
        return await self.request("PUT", path, params=params, body=body)

    async def apply(
        self,
        path: str,
        body: Mapping[str, Any],
        field_manager: str,
        force: bool = True,
        want_reply: bool = True,
    ) -> Any:
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return await self.request(
            "PATCH", path, params=params, body=body, content_type=APPLY_PATCH, want_reply=want_reply
        )

    async def patch(
        self, path: str, body: Mapping[str, Any], content_type: str = MERGE_PATCH, **params: str
    ) -> Any:
        return await self.request("PATCH", path, params=params, body=body, content_type=content_type)

    async def delete(self, path: str, uid: str | None = None, **params: str) -> Any:
        return await self.request("DELETE", path, params=params, body=delete_options(uid))
