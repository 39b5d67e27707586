"""Leader election as the runtime runs it, against a fake Lease API over HTTP: the replica that
cannot renew stops believing it leads before a standby may take the Lease, whatever the API
server does with its requests; a failed or unanswered request is one failed attempt, as in
client-go."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubeconfigs import local_api_server

from operators.core import runtime
from operators.core.client import KubeClient, WriteFence
from operators.core.events import NORMAL, ObjectRef
from operators.core.keys import Key
from operators.core.settings import OperatorSettings

NAMESPACE = "dra-operators"
LEASE = "dra-operators-leasetest"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
# Short, as the library accepts (a renew deadline above 1.2 retry periods), with the 3 s that
# kube-controller-manager's 15, 10 and 2 leave between a leader giving up (a retry period and a renew
# deadline after its last renewal) and a standby taking over: the margin a loaded machine runs on.
LEASE_SECONDS, RENEW_SECONDS, RETRY_SECONDS = 6, 2, 1


class LeaseApi:
    """kube-apiserver's Lease endpoints, with optimistic concurrency on resourceVersion. The next
    ``stall`` Lease requests get no answer, as on a connection to a hung API server; the next
    ``drop`` ones have their connection closed without one; the next ``busy`` ones are refused as
    API Priority and Fairness refuses, in plain text."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        # (holder, loop time) of every accepted write.
        self.writes: list[tuple[str, float]] = []
        self.stall = 0
        self.drop = 0
        self.busy = 0
        self.released = asyncio.Event()
        # The paths of the operator's own writes.
        self.written: list[str] = []

    def status(self, code: int, reason: str) -> web.Response:
        return web.json_response({"kind": "Status", "code": code, "reason": reason}, status=code)

    def store(self, body: dict[str, Any]) -> web.Response:
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.lease = body
        self.writes.append((body["spec"]["holderIdentity"], asyncio.get_running_loop().time()))
        return web.json_response(body)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/version":
            return web.json_response({"major": "1", "minor": "37"})
        if request.path == f"/api/v1/namespaces/{NAMESPACE}":
            return web.json_response({"kind": "Namespace", "status": {"phase": "Active"}})
        if request.method != "GET" and not request.path.startswith(LEASES):
            self.written.append(request.path)
            return web.json_response(await request.json(), status=201)
        if not request.path.startswith(LEASES):
            return self.status(404, "NotFound")
        if self.stall:
            self.stall -= 1
            await self.released.wait()
        if self.drop:
            self.drop -= 1
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if self.busy:
            self.busy -= 1
            return web.Response(status=429, text="Too many requests, please try again later.")
        if request.method == "GET":
            return web.json_response(self.lease) if self.lease else self.status(404, "NotFound")
        body = await request.json()
        if request.method == "POST":
            return self.status(409, "AlreadyExists") if self.lease else self.store(body)
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            return self.status(409, "Conflict")
        return self.store(body)

    def held_by(self, holder: str, renewed: datetime) -> None:
        time = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": holder, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": time}
        self.store(
            {"metadata": {"name": LEASE, "namespace": NAMESPACE}, "spec": {**spec, "acquireTime": time}}
        )


@pytest.fixture
async def leases(tmp_path: Path) -> AsyncIterator[tuple[LeaseApi, str]]:
    api = LeaseApi()
    async with local_api_server(api.handle, tmp_path) as config:
        try:
            yield api, config
        finally:
            api.released.set()


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.02)


class Candidate:
    """One replica's leader election, as run() starts it."""

    def __init__(self, config: str, identity: str) -> None:
        self.settings = OperatorSettings(
            kubeconfig=config,
            namespace=NAMESPACE,
            identity=identity,
            leader_elect=True,
            leader_elect_lease_duration=LEASE_SECONDS,
            leader_elect_renew_deadline=RENEW_SECONDS,
            leader_elect_retry_period=RETRY_SECONDS,
        )
        self.acquired = asyncio.Event()
        self.lost = asyncio.Event()
        self.lost_at: float | None = None
        self.client: KubeClient | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Candidate:
        self.client = await KubeClient.from_kubeconfig(self.settings.kubeconfig)
        self.task = asyncio.create_task(
            runtime._lead(
                self.settings,
                self.client.sibling(own_fence=True),
                LEASE,
                self.acquired,
                self.lost,
                WriteFence(),
            )
        )

        async def note_loss() -> None:
            await self.lost.wait()
            self.lost_at = asyncio.get_running_loop().time()

        self._noting = asyncio.create_task(note_loss())
        return self

    async def close(self) -> None:
        for task in (self.task, self._noting):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.client is not None:
            await self.client.close()


@pytest.fixture
async def candidates(leases: tuple[LeaseApi, str]) -> AsyncIterator[Callable[[str], Awaitable[Candidate]]]:
    started: list[Candidate] = []

    async def start(identity: str) -> Candidate:
        candidate = await Candidate(leases[1], identity).start()
        started.append(candidate)
        return candidate

    try:
        yield start
    finally:
        leases[0].released.set()
        for candidate in started:
            await candidate.close()


async def test_a_leader_whose_lease_requests_hang_stops_leading_before_the_lease_expires(
    leases: tuple[LeaseApi, str], candidates: Callable[[str], Awaitable[Candidate]]
) -> None:
    api, _ = leases
    leader = await candidates("a")
    await asyncio.wait_for(leader.acquired.wait(), 5)
    await until(lambda: len(api.writes) >= 2, 5, "a renewal")
    api.stall = 1000
    last_renewal = api.writes[-1][1]
    # The moment is noted by a task of its own, which runs after the event is set.
    await until(lambda: leader.lost_at is not None, LEASE_SECONDS + 2, "the leader to give up")
    assert leader.lost_at is not None
    # A standby takes the Lease once it has seen no change for a lease duration.
    assert leader.lost_at - last_renewal < LEASE_SECONDS


@pytest.mark.parametrize(
    ("failure", "count"),
    [
        # aiohttp sends an idempotent request once more, on a new connection: two drops fail one attempt.
        pytest.param("drop", 2, id="a-dropped-connection"),
        # API Priority and Fairness refuses in plain text, which the library parsed as JSON.
        pytest.param("busy", 1, id="a-429-in-plain-text"),
    ],
)
async def test_a_failed_request_is_one_failed_attempt_not_the_loss_of_the_lease(
    leases: tuple[LeaseApi, str], candidates: Callable[[str], Awaitable[Candidate]], failure: str, count: int
) -> None:
    api, _ = leases
    leader = await candidates("a")
    await asyncio.wait_for(leader.acquired.wait(), 5)
    setattr(api, failure, count)
    renewed = len(api.writes)
    await until(lambda: len(api.writes) >= renewed + 2 or leader.lost.is_set(), 10, "two more renewals")
    assert not leader.lost.is_set(), f"{failure} cost the Lease"


async def test_an_unanswered_request_does_not_keep_a_standby_from_leading(
    leases: tuple[LeaseApi, str], candidates: Callable[[str], Awaitable[Candidate]]
) -> None:
    api, _ = leases
    api.stall = 1
    standby = await candidates("b")
    await until(standby.acquired.is_set, RENEW_SECONDS + RETRY_SECONDS + 3, "the Lease to be acquired")


async def test_a_standby_does_not_take_a_live_lease_whose_holder_clock_is_behind(
    leases: tuple[LeaseApi, str], candidates: Callable[[str], Awaitable[Candidate]]
) -> None:
    """The holder's renewTime is its own clock's: only whether the record changes counts."""
    api, _ = leases
    behind = datetime(2020, 1, 1, tzinfo=UTC)
    api.held_by("a", behind)
    standby = await candidates("b")

    async def live_holder() -> None:
        for step in range(2 * (LEASE_SECONDS + 1)):
            await asyncio.sleep(RETRY_SECONDS / 2)
            assert api.lease is not None
            api.held_by("a", behind.replace(second=step))

    await live_holder()
    assert not standby.acquired.is_set()
    assert api.lease is not None
    assert api.lease["spec"]["holderIdentity"] == "a"


# --- the runtime's reaction ------------------------------------------------------------------------

WRITES = "/api/v1/namespaces/default/configmaps"


class Operator:
    """A controller whose prepare() waits for the test, then queues one key; its sync writes once,
    or waits for ``finish`` first (a slow action call) when asked to, and then records an Event
    when ``report`` says so."""

    def __init__(self) -> None:
        self.runtime: runtime.Runtime | None = None
        self.preparing = asyncio.Event()
        self.go = asyncio.Event()
        self.syncing = asyncio.Event()
        self.finish: asyncio.Event | None = None
        self.report = False

    def make(self, rt: runtime.Runtime) -> Operator:
        self.runtime = rt
        return self

    async def prepare(self) -> bool:
        self.preparing.set()
        await self.go.wait()
        assert self.runtime is not None
        self.runtime.queue.add(Key("Thing", "", "one"))
        return True

    async def sync(self, key: Key) -> None:
        assert self.runtime is not None
        self.syncing.set()
        if self.finish is not None:
            await self.finish.wait()
        if self.report:
            thing = ObjectRef("v1", "ConfigMap", key.name, "default", "uid-1")
            self.runtime.events.record(thing, NORMAL, "Finishing", "finished while stopping")
        await self.runtime.client.create(WRITES, {"metadata": {"name": key.name}})

    def definition(self) -> runtime.OperatorDefinition:
        return runtime.OperatorDefinition(
            name="leasetest",
            settings_class=OperatorSettings,
            default_workers=2,
            make_controller=self.make,
            component=LEASE,
        )


def operator_settings(config: str, **values: Any) -> OperatorSettings:
    return OperatorSettings(
        kubeconfig=config,
        namespace=NAMESPACE,
        identity="a",
        leader_elect=True,
        leader_elect_lease_duration=LEASE_SECONDS,
        leader_elect_renew_deadline=RENEW_SECONDS,
        leader_elect_retry_period=RETRY_SECONDS,
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
        metrics_secure=False,
        **values,
    )


@pytest.fixture
def losses(monkeypatch: pytest.MonkeyPatch) -> list[asyncio.Event]:
    """The ``lost`` event of every election run() starts."""
    seen: list[asyncio.Event] = []
    lead = runtime._lead

    async def recorded(*args: Any) -> None:
        seen.append(args[4])
        await lead(*args)

    monkeypatch.setattr(runtime, "_lead", recorded)
    return seen


async def test_a_lease_lost_while_starting_stops_every_write(
    leases: tuple[LeaseApi, str], losses: list[asyncio.Event]
) -> None:
    api, config = leases
    operator = Operator()
    running = asyncio.create_task(
        runtime.run(
            operator.definition(), operator_settings(config), stop=asyncio.Event(), configure_logging=False
        )
    )
    try:
        await asyncio.wait_for(operator.preparing.wait(), 5)
        api.held_by("b", datetime.now(UTC))  # another replica holds it, e.g. after a partition
        await until(lambda: losses[0].is_set(), LEASE_SECONDS + 2, "the Lease to be lost")
        operator.go.set()
        assert await asyncio.wait_for(running, 10) == runtime.LEASE_LOST
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert api.written == []


async def test_a_lease_is_not_released_while_a_sync_still_runs(
    leases: tuple[LeaseApi, str],
) -> None:
    api, config = leases
    operator = Operator()
    operator.go.set()
    operator.finish = asyncio.Event()
    stop = asyncio.Event()
    running = asyncio.create_task(
        runtime.run(
            operator.definition(),
            operator_settings(config, shutdown_grace_period=0.1),
            stop=stop,
            configure_logging=False,
        )
    )
    try:
        await asyncio.wait_for(operator.syncing.wait(), 5)
        stop.set()
        assert await asyncio.wait_for(running, 20) == 0
    finally:
        operator.finish.set()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert api.lease is not None
    assert api.lease["spec"]["holderIdentity"] == "a", "released while a sync was still running"


async def test_an_event_recorded_while_stopping_is_posted(leases: tuple[LeaseApi, str]) -> None:
    """Once stopping, the controller's client sends nothing new; the Events of the syncs that finish
    in the grace period are still posted before the process exits."""
    api, config = leases
    operator = Operator()
    operator.go.set()
    operator.finish = asyncio.Event()
    operator.report = True
    stop = asyncio.Event()
    running = asyncio.create_task(
        runtime.run(operator.definition(), operator_settings(config), stop=stop, configure_logging=False)
    )
    try:
        await asyncio.wait_for(operator.syncing.wait(), 5)
        assert operator.runtime is not None
        stopping = operator.runtime.client._stopping
        stop.set()
        await until(stopping.is_set, 5, "the operator to stop")
        operator.finish.set()
        await asyncio.wait_for(running, 20)
    finally:
        operator.finish.set()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert "/api/v1/namespaces/default/events" in api.written


async def test_a_lease_is_released_once_every_sync_has_finished(leases: tuple[LeaseApi, str]) -> None:
    api, config = leases
    operator = Operator()
    operator.go.set()
    stop = asyncio.Event()
    running = asyncio.create_task(
        runtime.run(operator.definition(), operator_settings(config), stop=stop, configure_logging=False)
    )
    try:
        await until(lambda: bool(api.written), 5, "the sync's write")
        stop.set()
        assert await asyncio.wait_for(running, 20) == 0
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert api.lease is not None
    assert api.lease["spec"]["holderIdentity"] is None
