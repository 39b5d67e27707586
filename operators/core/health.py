"""Liveness, readiness and the metrics endpoint, served by aiohttp.

- ``/healthz`` (liveness): the process's event loop answers. Nothing else: the kubelet restarts a
  process that fails it, and a restart mends only a process that is stuck, not an API server
  that is away (restarting then would turn an outage into a crash loop, and every watch would
  have to list again once it is back).
- ``/readyz`` (readiness): the API server has answered within ``api_unreachable_timeout``
  seconds, and every readiness gate is true: the informers' initial listing is complete, the
  APIs the operator needs are served (discovery; the answer names the kinds that are not), and
  this replica holds the leader Lease (or leader election is off). A standby that waits for the
  Lease is ready too, once its own namespace exists ("ok: standby"): a Deployment counts only
  ready pods as available, so a standby that never became ready would stop every rolling update
  of the ha overlay (the new pod waits for the Lease, the old one waits for the new one). The
  coexistence guard makes an operator not ready for good (:meth:`Health.refuse`), with its
  reason as the answer; liveness is unaffected.
- ``/metrics``: Prometheus text format; by default over HTTPS, for clients allowed to get it
  (:mod:`.metricsauth`).

Metrics and probes may share one listener or use two, as the flags say.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from dataclasses import dataclass, field

from aiohttp import web

from . import metrics, metricsauth
from .metricsauth import MetricsAuthorizer
from .settings import ConfigurationError, one_line

log = logging.getLogger(__name__)


LEADER = "leader"
APIS_SERVED = "apis-served"
"""The gate the runtime closes while a required kind is not served or prepare() says not ready."""
STANDBY_GATES = frozenset({"namespace"})
"""What a standby must have to be ready: the namespace its Lease lives in."""


@dataclass
class Health:
    api_unreachable_timeout: float = 60.0
    gates: dict[str, bool] = field(default_factory=dict)
    # Why a closed gate is closed, where its owner says: part of the readiness answer.
    reasons: dict[str, str] = field(default_factory=dict)
    last_api_success: float = field(default_factory=time.monotonic)
    # Not ready for a reason no gate will clear, e.g. the coexistence guard; live all the same,
    # so that the kubelet does not restart the process into the same state over and over.
    refused: str = ""

    def api_ok(self) -> None:
        self.last_api_success = time.monotonic()

    def set_gate(self, name: str, value: bool, reason: str = "") -> None:
        if self.gates.get(name) != value:
            log.info("readiness gate %s is now %s", name, value)
        self.gates[name] = value
        self.reasons[name] = "" if value else reason

    def alive(self) -> tuple[bool, str]:
        # Answering at all is the proof: the handler runs on the loop every sync runs on.
        return True, "ok"

    def refuse(self, reason: str) -> None:
        self.refused = reason

    def ready(self) -> tuple[bool, str]:
        if self.refused:
            return False, self.refused
        silence = time.monotonic() - self.last_api_success
        if silence > self.api_unreachable_timeout:
            return False, f"API server unreachable for {silence:.0f}s"
        standby = self.gates.get(LEADER) is False
        gates = {n: v for n, v in self.gates.items() if n in STANDBY_GATES} if standby else self.gates
        waiting = sorted(name for name, value in gates.items() if not value)
        if waiting:
            return False, "waiting for: " + ", ".join(self._why(name) for name in waiting)
        return True, "ok: standby, waiting for the Lease" if standby else "ok"

    def _why(self, gate: str) -> str:
        reason = self.reasons.get(gate)
        return f"{gate} ({reason})" if reason else gate


def _probe(check: tuple[bool, str]) -> web.Response:
    ok, text = check
    return web.Response(status=200 if ok else 503, text=text + "\n")


def build_app(
    health: Health,
    *,
    probes: bool = True,
    metrics_endpoint: bool = True,
    authorizer: MetricsAuthorizer | None = None,
) -> web.Application:
    async def alive(_: web.Request) -> web.Response:
        return _probe(health.alive())

    async def ready(_: web.Request) -> web.Response:
        return _probe(health.ready())

    async def exposition(_: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), content_type="text/plain", charset="utf-8")

    app = web.Application(middlewares=[metricsauth.middleware(authorizer)] if authorizer else [])
    if probes:
        app.router.add_get("/healthz", alive)
        app.router.add_get("/livez", alive)
        app.router.add_get("/readyz", ready)
    if metrics_endpoint:
        app.router.add_get("/metrics", exposition)
    return app


def split_address(address: str) -> tuple[str | None, int]:
    """(host, port) of ``host:port``, ``[v6 address]:port`` or ``:port``; no host (None) listens
    on every address of both families, so IPv6-only clusters can probe and scrape too."""
    host, _, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    return (host or None), int(port)


@dataclass(frozen=True)
class SecureMetrics:
    """HTTPS and the token checks for /metrics (:mod:`.metricsauth`)."""

    authorizer: MetricsAuthorizer
    tls: ssl.SSLContext


async def serve(
    health: Health, metrics_address: str, probe_address: str, secure: SecureMetrics | None = None
) -> list[web.AppRunner]:
    """Start the listeners: one when both addresses are equal (plain metrics only), else one each.

    A port in use is a :class:`ConfigurationError` naming the flag: the usual cause is a second
    operator started on the same machine with the default ports."""
    metrics_flag, probe_flag = "--metrics-bind-address", "--health-probe-bind-address"
    tls = secure.tls if secure else None
    apps: list[tuple[web.Application, str, str, ssl.SSLContext | None]]
    if metrics_address == probe_address:
        assert secure is None, "the settings refuse a shared listener for secure metrics"
        apps = [(build_app(health), metrics_address, f"{metrics_flag} and {probe_flag}", None)]
    else:
        authorizer = secure.authorizer if secure else None
        apps = [
            (build_app(health, metrics_endpoint=False), probe_address, probe_flag, None),
            (build_app(health, probes=False, authorizer=authorizer), metrics_address, metrics_flag, tls),
        ]
    runners: list[web.AppRunner] = []
    for app, address, flag, context in apps:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        try:
            await web.TCPSite(runner, *split_address(address), ssl_context=context).start()
        except OSError as err:
            await stop(runners)
            # asyncio's message repeats the address; the errno's text alone is the reason.
            reason = os.strerror(err.errno) if err.errno else one_line(err)
            raise ConfigurationError(f"cannot listen on {address} ({flag}): {reason}") from err
    return runners


async def stop(runners: list[web.AppRunner]) -> None:
    for runner in runners:
        await runner.cleanup()
