from __future__ import annotations

import ipaddress
import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from bindingattacher_builders import attach_request, refused_action
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from devcluster import pki
from operators.bindingattacher.actions.base import ActionConfigError, Operation, Outcome
from operators.bindingattacher.actions.calls import CallOutcome, close_action, invoke
from operators.bindingattacher.actions.factory import BuildContext, build_action
from operators.bindingattacher.actions.webhook import (
    WebhookAction,
    WebhookSettings,
    result_for_response,
    ssl_context,
)
from operators.bindingattacher.models import ActionSpec
from operators.core.client import MAX_RETRY_AFTER_SECONDS

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def server_context(cert_pem: str, key_pem: str, client_ca: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as directory:
        cert_path, key_path = Path(directory, "c.pem"), Path(directory, "k.pem")
        cert_path.write_text(cert_pem)
        key_path.write_text(key_pem)
        context.load_cert_chain(cert_path, key_path)
    if client_ca:
        context.load_verify_locations(cadata=client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@dataclass
class Server:
    url: str
    seen: list[dict[str, Any]]


async def serve(context: ssl.SSLContext, handler: Handler) -> AsyncIterator[Server]:
    seen: list[dict[str, Any]] = []

    async def recording(request: web.Request) -> web.StreamResponse:
        seen.append({"path": request.path, "headers": dict(request.headers), "body": await request.json()})
        return await handler(request)

    app = web.Application()
    app.router.add_post("/v1/{operation}", recording)
    app.router.add_get("/elsewhere", recording)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Server(f"https://127.0.0.1:{port}/v1", seen)
    finally:
        await runner.cleanup()


def pem(ca: pki.Authority) -> str:
    return ca.cert_pem.decode()


def issue(
    ca: pki.Authority, common_name: str, names: list[x509.GeneralName], *, client: bool = False
) -> tuple[str, str]:
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    cert, key = ca.issue(pki.name(common_name), usage, names)
    return cert.decode(), key.decode()


CA = pki.Authority.create("dra-operators test CA")
IP_NAMES: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
SERVER_CERT = issue(CA, "webhook", IP_NAMES)
NAMED_CERT = issue(CA, "webhook", [x509.DNSName("fabric-manager.test")])


async def by_operation(request: web.Request) -> web.StreamResponse:
    operation = request.match_info["operation"]
    if operation == "attach":
        return web.json_response({"outcome": "Succeeded", "message": "via sw-2", "data": {"port": 7}})
    if operation == "probe":
        return web.json_response({"message": "still going"}, status=202, headers={"Retry-After": "3"})
    return web.Response(status=204)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async for running in serve(server_context(*SERVER_CERT), by_operation):
        yield running


def action_for(url: str, ca: str | None = pem(CA), **settings: Any) -> WebhookAction:
    return WebhookAction(WebhookSettings(url=url, ssl_context=ssl_context(ca), **settings))


async def attach_once(action: WebhookAction) -> CallOutcome:
    """The outcome of one attach call through ``action``, which is closed afterwards."""
    try:
        return await invoke(action, Operation.ATTACH, attach_request(), 5)
    finally:
        await action.close()


async def test_attach_probe_and_detach_over_verified_tls(server: Server) -> None:
    action = action_for(server.url, bearer_token="s3cret", probe=True)
    try:
        request = attach_request()
        attached = await invoke(action, Operation.ATTACH, request, 5)
        assert attached.result.outcome is Outcome.SUCCEEDED
        assert attached.result.message == "via sw-2"
        assert attached.result.data == {"port": 7}
        probed = await invoke(action, Operation.PROBE, request, 5)
        assert (probed.result.outcome, probed.result.retry_after_seconds) == (Outcome.IN_PROGRESS, 3.0)
        detached = await invoke(action, Operation.DETACH, request, 5)
        assert detached.result.outcome is Outcome.SUCCEEDED
    finally:
        await action.close()
    assert [s["path"] for s in server.seen] == ["/v1/attach", "/v1/probe", "/v1/detach"]
    headers = server.seen[0]["headers"]
    assert headers["Idempotency-Key"] == request.attachment_key
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Content-Type"] == "application/json"
    assert server.seen[0]["body"]["attachmentKey"] == request.attachment_key
    assert server.seen[0]["body"]["operation"] == "Attach"


async def test_untrusted_server_is_a_transient_error(server: Server) -> None:
    stranger = pki.Authority.create("someone else")
    outcome = await attach_once(action_for(server.url, ca=pem(stranger)))
    assert outcome.result.outcome is Outcome.TRANSIENT_ERROR
    assert "certificate" in outcome.result.message.lower()
    assert server.seen == []


async def test_hostname_is_verified_and_server_name_overrides_it() -> None:
    async for running in serve(server_context(*NAMED_CERT), by_operation):
        refused = await attach_once(action_for(running.url))
        assert refused.result.outcome is Outcome.TRANSIENT_ERROR
        accepted = await attach_once(action_for(running.url, server_name="fabric-manager.test"))
        assert accepted.result.outcome is Outcome.SUCCEEDED


async def test_mutual_tls_with_client_certificate() -> None:
    client_ca = pki.Authority.create("client CA")
    client_cert, client_key = issue(client_ca, "attacher", [], client=True)
    async for running in serve(server_context(*SERVER_CERT, client_ca=pem(client_ca)), by_operation):
        refused = await attach_once(action_for(running.url))
        assert refused.result.outcome is Outcome.TRANSIENT_ERROR
        spec = ActionSpec.model_validate(
            {
                "kind": "Webhook",
                "webhook": {
                    "url": running.url,
                    "caSecretRef": {"name": "ca"},
                    "clientCertSecretRef": {"name": "client"},
                },
            }
        )
        secrets = {"ca": {"ca.crt": pem(CA)}, "client": {"tls.crt": client_cert, "tls.key": client_key}}
        built = await build_action(spec, BuildContext(policy_name="p", secrets=secrets))
        try:
            accepted = await invoke(built.action, Operation.ATTACH, attach_request(), 5)
        finally:
            await close_action(built.action)
        assert accepted.result.outcome is Outcome.SUCCEEDED
        assert built.description == f"webhook action {running.url}"


async def test_status_codes_map_to_outcomes() -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        status = int(request.headers["X-Answer"])
        if status == 302:
            raise web.HTTPFound("/elsewhere")
        if status == 299:
            return web.Response(body=b"x" * 70000)
        return web.json_response({"message": f"answer {status}"}, status=status, headers={"Retry-After": "4"})

    async for running in serve(server_context(*SERVER_CERT), answer):
        results: dict[int, Any] = {}
        for status in (404, 409, 429, 500, 302, 299):
            action = action_for(running.url)
            try:
                session = action._client()
                session.headers["X-Answer"] = str(status)
                results[status] = (await invoke(action, Operation.ATTACH, attach_request(), 5)).result
            finally:
                await action.close()
        assert (results[404].outcome, results[404].message) == (
            Outcome.PERMANENT_ERROR,
            "HTTP 404: answer 404",
        )
        assert (results[409].outcome, results[409].retry_after_seconds) == (Outcome.TRANSIENT_ERROR, 4.0)
        assert results[429].outcome is Outcome.TRANSIENT_ERROR
        assert results[500].outcome is Outcome.TRANSIENT_ERROR
        assert results[302].outcome is Outcome.PERMANENT_ERROR
        assert "redirect" in results[302].message
        assert results[299].outcome is Outcome.TRANSIENT_ERROR
        assert "exceeds" in results[299].message
        assert [s["path"] for s in running.seen].count("/elsewhere") == 0


def test_status_table_without_network() -> None:
    assert result_for_response(200, "OK", {}, b"").outcome is Outcome.SUCCEEDED
    assert (
        result_for_response(201, "Created", {}, b'{"outcome": "InProgress"}').outcome is Outcome.IN_PROGRESS
    )
    assert result_for_response(202, "Accepted", {}, b"").outcome is Outcome.IN_PROGRESS
    assert result_for_response(400, "Bad Request", {}, b"").message == "HTTP 400 Bad Request"
    assert result_for_response(401, "Unauthorized", {}, b"").outcome is Outcome.TRANSIENT_ERROR
    assert result_for_response(423, "Locked", {"Retry-After": "x"}, b"").retry_after_seconds is None
    assert result_for_response(200, "OK", {}, b"not json").outcome is Outcome.TRANSIENT_ERROR


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        ("1.5", 1.5),
        ("", None),
        ("-5", None),
        ("nan", None),
        ("inf", None),
        ("1e9", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
        ("86400", MAX_RETRY_AFTER_SECONDS),
    ],
)
@pytest.mark.parametrize(("status", "outcome"), [(202, Outcome.IN_PROGRESS), (429, Outcome.TRANSIENT_ERROR)])
def test_a_retry_after_header_is_read_as_the_core_reads_it(
    header: str, seconds: float | None, status: int, outcome: Outcome
) -> None:
    result = result_for_response(status, "", {"Retry-After": header}, b"")
    assert (result.outcome, result.retry_after_seconds) == (outcome, seconds)


@pytest.mark.parametrize(
    ("body", "seconds"),
    [
        (b'{"retryAfterSeconds": 2.5}', 2.5),
        (b'{"retryAfterSeconds": -1}', None),
        (b'{"retryAfterSeconds": 1000000000}', MAX_RETRY_AFTER_SECONDS),
        # Not JSON: the body is invalid, and the header is what is left.
        (b'{"retryAfterSeconds": NaN}', None),
        (b'{"retryAfterSeconds": Infinity}', None),
        (b'{"retryAfterSeconds": 1e999}', None),
    ],
)
def test_a_retry_after_in_the_body_is_bounded_as_the_header_is(body: bytes, seconds: float | None) -> None:
    result = result_for_response(202, "Accepted", {"Retry-After": "3"}, body)
    assert result.retry_after_seconds == (3.0 if seconds is None else seconds)


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
async def test_a_response_holding_a_number_json_cannot_carry_is_transient(number: bytes) -> None:
    """Read as it was, its data would make the claim status write unsendable on every retry."""

    async def succeeded(request: web.Request) -> web.StreamResponse:
        body = b'{"outcome":"Succeeded","data":{"x":' + number + b"}}"
        return web.Response(body=body, content_type="application/json")

    async for running in serve(server_context(*SERVER_CERT), succeeded):
        outcome = await attach_once(action_for(running.url))
        assert outcome.result.outcome is Outcome.TRANSIENT_ERROR
        assert outcome.result.message.startswith("invalid JSON in response: ")
        assert number.decode() in outcome.result.message
        assert outcome.result.data is None


async def test_a_webhook_asking_to_wait_forever_is_polled_again() -> None:
    async def forever(request: web.Request) -> web.StreamResponse:
        return web.json_response({"message": "busy"}, status=429, headers={"Retry-After": "inf"})

    async for running in serve(server_context(*SERVER_CERT), forever):
        outcome = await attach_once(action_for(running.url))
        assert (outcome.result.outcome, outcome.result.retry_after_seconds) == (Outcome.TRANSIENT_ERROR, None)


async def test_connection_refused_is_transient() -> None:
    outcome = await attach_once(action_for("https://127.0.0.1:9/v1"))
    assert outcome.result.outcome is Outcome.TRANSIENT_ERROR


@pytest.mark.parametrize(
    ("webhook", "reason"),
    [
        ({"url": "http://fabric-manager.test/v1"}, "InvalidActionConfig"),
        ({"url": "https://x.test", "caBundle": "pem", "caSecretRef": {"name": "ca"}}, "InvalidActionConfig"),
        ({"url": "https://x.test", "caSecretRef": {"name": "missing"}}, "SecretNotFound"),
        (
            {"url": "https://x.test", "bearerTokenSecretRef": {"name": "tok", "key": "other"}},
            "SecretNotFound",
        ),
        ({"url": "https://x.test", "caBundle": "not pem"}, "InvalidActionConfig"),
    ],
)
async def test_factory_rejections(webhook: dict[str, Any], reason: str) -> None:
    spec = ActionSpec.model_validate({"kind": "Webhook", "webhook": webhook})
    error = await refused_action(spec, BuildContext(policy_name="p", secrets={"tok": {"token": "t"}}))
    assert error.reason == reason


async def test_insecure_http_is_flagged_in_the_description() -> None:
    spec = ActionSpec.model_validate(
        {"kind": "Webhook", "webhook": {"url": "http://x.test/v1", "allowInsecureHTTP": True}}
    )
    built = await build_action(spec, BuildContext(policy_name="p", allow_insecure_webhooks=True))
    assert "InsecureTransport" in built.description
    await close_action(built.action)


async def test_plain_http_and_url_credentials_need_the_operator_too() -> None:
    """Issue #38: a policy author alone cannot send the bearer token in clear text, and a
    password in a URL never reaches a condition."""
    plain = ActionSpec.model_validate(
        {"kind": "Webhook", "webhook": {"url": "http://x.test/v1", "allowInsecureHTTP": True}}
    )
    error = await refused_action(plain, BuildContext(policy_name="p"))
    assert "--allow-insecure-webhooks" in error.message
    secret = ActionSpec.model_validate(
        {"kind": "Webhook", "webhook": {"url": "https://user:hunter2@x.test/v1"}}
    )
    error = await refused_action(secret, BuildContext(policy_name="p"))
    assert "hunter2" not in error.message
    assert "***@x.test" in error.message
    built = await build_action(secret, BuildContext(policy_name="p", allow_insecure_webhooks=True))
    assert "hunter2" not in built.description
    await close_action(built.action)


async def test_timeouts_have_a_ceiling() -> None:
    slow = ActionSpec.model_validate(
        {"kind": "Webhook", "webhook": {"url": "https://x.test/v1", "connectTimeout": "10m"}}
    )
    error = await refused_action(slow, BuildContext(policy_name="p"))
    assert error.message == "spec.action.webhook.connectTimeout: 10m must be at most 60s"


def test_request_body_is_json() -> None:
    from operators.bindingattacher.actions.calls import encode_request

    assert json.loads(encode_request(attach_request()))["kind"] == "AttachRequest"


def test_client_certificate_without_a_writable_tmp_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # What a readOnlyRootFilesystem pod without a /tmp emptyDir sees.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    client_cert, client_key = issue(pki.Authority.create("client CA"), "attacher", [], client=True)
    with pytest.raises(ActionConfigError) as raised:
        ssl_context(pem(CA), client_cert, client_key)
    assert raised.value.reason == "InvalidActionConfig"
    assert "cannot stage the client certificate" in raised.value.message
    assert "emptyDir at /tmp" in raised.value.message
