"""``/metrics`` over HTTPS for authenticated and authorised clients only, as kubebuilder's
operators serve it by default (controller-runtime's ``filters.WithAuthenticationAndAuthorization``).

Each request's bearer token is checked with a TokenReview, and the user it names with a
SubjectAccessReview for ``get`` on the non-resource URL ``/metrics``: the ClusterRole
``dra-operators-metrics-reader`` grants exactly that. Answers are cached as controller-runtime's
delegating authenticator and authorizer cache them (a token for a minute, an allowed user for
five, a denial for thirty seconds), so a scrape every 30 s costs the API server almost nothing.

Anyone who reaches the port can send tokens, so checking them is bounded: at most
``MAX_REVIEWS_IN_FLIGHT`` reviews at once (beyond that the answer is 429 and nothing is sent to
the API server), each within ``REVIEW_TIMEOUT`` seconds (503 then), and at most ``MAX_CACHED``
answers per cache (the oldest go first). A flood of bogus tokens therefore costs a bounded number
of TokenReviews and bounded memory, and a known scraper's cached answer is served throughout.

The serving certificate comes from ``--metrics-cert-dir`` (``tls.crt`` and ``tls.key``, e.g. from
cert-manager), or else is self-signed at start, as controller-runtime does; Prometheus then
scrapes with ``insecureSkipVerify`` and authenticates with its ServiceAccount token.

``--metrics-secure=false`` serves plain HTTP to anyone who reaches the port (local runs).
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from .client import ApiError, KubeClient
from .resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from .settings import ConfigurationError

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
API_CALLS = [
    ("authentication.k8s.io", "tokenreviews", "create"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"),
]
"""What checking a scrape costs in RBAC: every operator's ClusterRole grants these."""
TOKEN_TTL = 60.0
ALLOWED_TTL = 300.0
DENIED_TTL = 30.0
MAX_REVIEWS_IN_FLIGHT = 8
REVIEW_TIMEOUT = 10.0
MAX_CACHED = 1024
CERT_NAME, KEY_NAME = "tls.crt", "tls.key"
CERT_VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class Verdict:
    status: int  # 200, 401 or 403
    reason: str


def _bearer(header: str | None) -> str | None:
    scheme, _, token = (header or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class MetricsAuthorizer:
    """TokenReview then SubjectAccessReview, with their answers cached."""

    def __init__(self, client: KubeClient, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self._clock = clock
        self._users: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._decisions: dict[str, tuple[float, Verdict]] = {}
        self._in_flight = 0

    async def verdict(self, authorization: str | None) -> Verdict:
        token = _bearer(authorization)
        if token is None:
            return Verdict(401, "Unauthorized: a bearer token is required")
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        cached = self._decisions.get(key)
        if cached and cached[0] > now:
            return cached[1]
        if self._in_flight >= MAX_REVIEWS_IN_FLIGHT:
            return Verdict(429, "Too many requests: too many credentials are being checked; retry later")
        self._in_flight += 1
        try:
            verdict = await asyncio.wait_for(self._review(key, token, now), REVIEW_TIMEOUT)
        except TimeoutError:
            return Verdict(503, "the API server did not check the credentials in time; retry later")
        finally:
            self._in_flight -= 1
        ttl = ALLOWED_TTL if verdict.status == 200 else DENIED_TTL
        self._remember(self._decisions, key, (now + ttl, verdict), now)
        return verdict

    async def _review(self, key: str, token: str, now: float) -> Verdict:
        user = await self._user(key, token, now)
        if user is None:
            return Verdict(401, "Unauthorized: the token is not valid")
        return await self._authorize(user)

    async def _user(self, key: str, token: str, now: float) -> dict[str, Any] | None:
        cached = self._users.get(key)
        if cached and cached[0] > now:
            return cached[1]
        review = await self.client.create(
            TOKEN_REVIEWS.path(),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = (review or {}).get("status") or {}
        user = status.get("user") if status.get("authenticated") else None
        self._remember(self._users, key, (now + TOKEN_TTL, user), now)
        return user

    async def _authorize(self, user: dict[str, Any]) -> Verdict:
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "nonResourceAttributes": {"path": METRICS_PATH, "verb": "get"},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        review = await self.client.create(
            SUBJECT_ACCESS_REVIEWS.path(),
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        if ((review or {}).get("status") or {}).get("allowed"):
            return Verdict(200, "ok")
        return Verdict(
            403, f"Forbidden: {spec['user']} may not get {METRICS_PATH} (dra-operators-metrics-reader)"
        )

    @staticmethod
    def _remember(
        cache: dict[str, tuple[float, Any]], key: str, entry: tuple[float, Any], now: float
    ) -> None:
        """Store an answer, keeping the cache within MAX_CACHED entries: expired ones go first,
        then the oldest."""
        if len(cache) >= MAX_CACHED and key not in cache:
            for stale in [k for k, (until, _) in cache.items() if until <= now]:
                del cache[stale]
            while len(cache) >= MAX_CACHED:
                del cache[next(iter(cache))]
        cache[key] = entry

    def cached_answers(self) -> int:
        return len(self._users) + len(self._decisions)


def middleware(authorizer: MetricsAuthorizer) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def check(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            verdict = await authorizer.verdict(request.headers.get("Authorization"))
        except ApiError as err:
            log.warning("could not check a metrics request with the API server: %s", err)
            return web.Response(status=503, text="cannot check the credentials now\n")
        if verdict.status != 200:
            return web.Response(status=verdict.status, text=verdict.reason + "\n")
        return await handler(request)

    return check


def _self_signed(directory: Path) -> None:
    # Imported here: a process given --metrics-cert-dir, or plain HTTP, never loads it.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    host = socket.gethostname()
    names: list[x509.GeneralName] = [x509.DNSName(host), x509.DNSName("localhost")]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    # A common name has at most 64 characters, and a pod's host name (its name) can be longer:
    # the name goes into the subject alternative names, which have no such limit.
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dra-operators metrics")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    (directory / CERT_NAME).write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path = directory / KEY_NAME
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    os.chmod(key_path, 0o600)


def tls_context(cert_dir: str | None) -> ssl.SSLContext:
    """The serving context: the certificate of ``cert_dir``, or a self-signed one."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir:
        directory = Path(cert_dir)
        try:
            context.load_cert_chain(directory / CERT_NAME, directory / KEY_NAME)
        except (OSError, ssl.SSLError) as err:
            raise ConfigurationError(
                f"--metrics-cert-dir {cert_dir}: cannot load {CERT_NAME} and {KEY_NAME}: {err}"
            ) from err
        return context
    try:
        with tempfile.TemporaryDirectory(prefix="dra-operators-metrics-") as tmp:
            _self_signed(Path(tmp))
            # Loaded into memory here; the files go with the directory.
            context.load_cert_chain(Path(tmp) / CERT_NAME, Path(tmp) / KEY_NAME)
    except (OSError, ValueError) as err:
        raise ConfigurationError(
            f"cannot make the self-signed metrics certificate ({err}); mount a writable /tmp, pass "
            "--metrics-cert-dir, or --metrics-secure=false"
        ) from err
    return context
