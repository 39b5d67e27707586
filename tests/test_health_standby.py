from __future__ import annotations

import pytest

from operators.core.health import Health, split_address

pytestmark = pytest.mark.unit


def test_a_standby_is_ready_once_its_namespace_exists() -> None:
    health = Health()
    for gate in ("apis-served", "initial-listing", "leader", "namespace"):
        health.set_gate(gate, False)
    assert health.ready() == (False, "waiting for: namespace")
    health.set_gate("namespace", True)
    assert health.ready() == (True, "ok: standby, waiting for the Lease")


def test_the_leader_is_ready_only_when_every_gate_is() -> None:
    health = Health()
    for gate in ("apis-served", "initial-listing", "namespace"):
        health.set_gate(gate, False)
    health.set_gate("leader", True)
    assert health.ready() == (False, "waiting for: apis-served, initial-listing, namespace")
    for gate in ("apis-served", "initial-listing", "namespace"):
        health.set_gate(gate, True)
    assert health.ready() == (True, "ok")


def test_without_leader_election_every_gate_counts() -> None:
    health = Health()
    health.set_gate("leader", True)  # what the runtime sets when --leader-elect is off
    health.set_gate("initial-listing", False)
    assert health.ready() == (False, "waiting for: initial-listing")


def test_an_api_server_outage_fails_readiness_not_liveness() -> None:
    """The kubelet restarts what fails liveness; a restart cannot bring the API server back, so an
    outage only takes the operator out of its Service until the server answers again."""
    health = Health(api_unreachable_timeout=60.0)
    health.last_api_success -= 300
    assert health.alive() == (True, "ok")
    ready, why = health.ready()
    assert not ready
    assert why.startswith("API server unreachable for 3")
    health.api_ok()
    assert health.ready() == (True, "ok")


@pytest.mark.parametrize(
    ("address", "expected"),
    [(":8080", (None, 8080)), ("127.0.0.1:8081", ("127.0.0.1", 8081)), ("[::1]:8080", ("::1", 8080))],
)
def test_listen_addresses(address: str, expected: tuple[str | None, int]) -> None:
    assert split_address(address) == expected
