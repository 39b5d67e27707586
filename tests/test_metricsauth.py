"""Secure /metrics: who gets the series, who gets 401 or 403, and how long answers are cached."""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

import aiohttp
import pytest

from operators.core import health as health_server
from operators.core import metricsauth
from operators.core.health import Health, SecureMetrics
from operators.core.metricsauth import ALLOWED_TTL, DENIED_TTL, TOKEN_TTL, MetricsAuthorizer
from operators.core.settings import ConfigurationError, OperatorSettings

pytestmark = pytest.mark.unit

PROMETHEUS = "system:serviceaccount:monitoring:prometheus"
READER: dict[str, Any] = {"username": PROMETHEUS, "uid": "u1", "groups": ["system:authenticated"]}


class Reviews:
    """The API server's answers to TokenReviews and SubjectAccessReviews, and what was asked."""

    def __init__(self, users: dict[str, dict[str, Any]], allowed: set[str]) -> None:
        self.users = users
        self.allowed = allowed
        self.asked: list[str] = []

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        kind = body["kind"]
        self.asked.append(kind)
        if kind == "TokenReview":
            user = self.users.get(body["spec"]["token"])
            return {"status": {"authenticated": True, "user": user} if user else {"authenticated": False}}
        spec = body["spec"]
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] in self.allowed}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _authorizer(reviews: Reviews, clock: Clock) -> MetricsAuthorizer:
    return MetricsAuthorizer(reviews, clock)  # type: ignore[arg-type]


@pytest.mark.parametrize("header", [None, "", "Basic dXNlcjpwdw==", "Bearer ", "Bearer"])
async def test_no_bearer_token_is_401_without_asking(header: str | None) -> None:
    reviews = Reviews({}, set())
    verdict = await _authorizer(reviews, Clock()).verdict(header)
    assert verdict.status == 401
    assert reviews.asked == []


async def test_an_unknown_token_is_401() -> None:
    verdict = await _authorizer(Reviews({}, set()), Clock()).verdict("Bearer forged")
    assert (verdict.status, verdict.reason) == (401, "Unauthorized: the token is not valid")


async def test_a_user_without_the_role_is_403_and_asked_again_after_30_s() -> None:
    reviews, clock = Reviews({"t": {"username": "alice"}}, set()), Clock()
    authorizer = _authorizer(reviews, clock)
    first = await authorizer.verdict("Bearer t")
    assert first.status == 403
    assert "alice may not get /metrics" in first.reason
    await authorizer.verdict("Bearer t")
    assert reviews.asked == ["TokenReview", "SubjectAccessReview"], "a denial is cached"
    clock.now += DENIED_TTL + 1
    reviews.allowed.add("alice")
    assert (await authorizer.verdict("Bearer t")).status == 200, (
        "granted later, allowed after the denial's TTL"
    )


async def test_an_allowed_reader_is_cached_for_five_minutes() -> None:
    reviews, clock = Reviews({"t": READER}, {PROMETHEUS}), Clock()
    authorizer = _authorizer(reviews, clock)
    for _ in range(10):
        assert (await authorizer.verdict("Bearer t")).status == 200
        clock.now += 20
    assert reviews.asked == ["TokenReview", "SubjectAccessReview"]
    clock.now += ALLOWED_TTL
    assert (await authorizer.verdict("Bearer t")).status == 200
    assert reviews.asked.count("TokenReview") == 2, f"the token TTL ({TOKEN_TTL} s) had passed too"


class SlowReviews(Reviews):
    """An API server that takes its time: reviews stay in flight until released."""

    def __init__(self, users: dict[str, dict[str, Any]], allowed: set[str]) -> None:
        super().__init__(users, allowed)
        self.release = asyncio.Event()

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        await self.release.wait()
        return await super().create(path, body)


async def test_a_flood_of_tokens_costs_a_bounded_number_of_reviews() -> None:
    """Issue #38: 1000 distinct bogus tokens at once; at most MAX_REVIEWS_IN_FLIGHT reviews reach
    the API server, the rest are told 429, and a known reader is still answered from the cache."""
    reviews = SlowReviews({"good": READER}, {PROMETHEUS})
    authorizer = _authorizer(reviews, Clock())
    reviews.release.set()
    assert (await authorizer.verdict("Bearer good")).status == 200
    reviews.release.clear()
    reviews.asked.clear()
    flood = [asyncio.ensure_future(authorizer.verdict(f"Bearer bogus-{i}")) for i in range(1000)]
    await asyncio.sleep(0)
    assert (await authorizer.verdict("Bearer good")).status == 200, (
        "a cached reader is served during the flood"
    )
    reviews.release.set()
    statuses = [verdict.status for verdict in await asyncio.gather(*flood)]
    assert statuses.count(401) == metricsauth.MAX_REVIEWS_IN_FLIGHT
    assert statuses.count(429) == 1000 - metricsauth.MAX_REVIEWS_IN_FLIGHT
    assert reviews.asked.count("TokenReview") == metricsauth.MAX_REVIEWS_IN_FLIGHT


async def test_the_caches_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metricsauth, "MAX_CACHED", 16)
    authorizer = _authorizer(Reviews({}, set()), Clock())
    for i in range(100):
        assert (await authorizer.verdict(f"Bearer bogus-{i}")).status == 401
    assert authorizer.cached_answers() <= 32


async def test_a_review_that_never_ends_is_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metricsauth, "REVIEW_TIMEOUT", 0.05)
    authorizer = _authorizer(SlowReviews({"good": READER}, {PROMETHEUS}), Clock())
    assert (await authorizer.verdict("Bearer good")).status == 503


async def test_the_secure_listener_refuses_without_a_token_and_serves_with_one() -> None:
    reviews = Reviews({"t": READER}, {PROMETHEUS})
    secure = SecureMetrics(_authorizer(reviews, Clock()), metricsauth.tls_context(None))
    metrics_port, probe_port = _free_port(), _free_port()
    runners = await health_server.serve(
        Health(), f"127.0.0.1:{metrics_port}", f"127.0.0.1:{probe_port}", secure
    )
    client_tls = ssl.create_default_context()
    client_tls.check_hostname = False
    client_tls.verify_mode = ssl.CERT_NONE
    try:
        async with aiohttp.ClientSession() as session:
            url = f"https://127.0.0.1:{metrics_port}/metrics"
            async with session.get(url, ssl=client_tls) as response:
                assert response.status == 401
            async with session.get(url, ssl=client_tls, headers={"Authorization": "Bearer t"}) as response:
                assert response.status == 200
                assert "dra_operators_" in await response.text()
            async with session.get(f"http://127.0.0.1:{probe_port}/readyz") as response:
                assert response.status in (200, 503), "probes stay plain HTTP, without a token"
    finally:
        await health_server.stop(runners)


def test_a_missing_certificate_directory_is_a_configuration_error(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"--metrics-cert-dir .*: cannot load tls\.crt and tls\.key"):
        metricsauth.tls_context(str(tmp_path))


def test_secure_metrics_need_their_own_listener() -> None:
    with pytest.raises(ValueError, match="needs an address of its own"):
        OperatorSettings(metrics_bind_address="127.0.0.1:9000", health_probe_bind_address="127.0.0.1:9000")
    OperatorSettings(
        metrics_bind_address="127.0.0.1:9000",
        health_probe_bind_address="127.0.0.1:9000",
        metrics_secure=False,
    )


def test_the_self_signed_certificate_takes_a_pod_s_long_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the first deployment: a pod's name (its host name) is longer than the 64
    characters a certificate's common name may have."""
    monkeypatch.setattr(
        socket, "gethostname", lambda: "dra-operators-bindingattacher-7d9f8c6b5d-x2k4q" + "-long" * 8
    )
    assert metricsauth.tls_context(None).minimum_version == ssl.TLSVersion.TLSv1_2
