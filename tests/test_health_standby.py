from __future__ import annotations

import pytest

from operators.core.health import Health

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
