"""Which policy owns a driver, the selection rules, and which action drives a record."""

from __future__ import annotations

from typing import Any

from bindingattacher_builders import FABRIC, record

from operators.bindingattacher.policy import PolicyBook


def _policy(name: str, created: str, driver: str = FABRIC, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "generation": 1,
            "creationTimestamp": created,
            "resourceVersion": "1",
            **meta,
        },
        "spec": {"driver": driver, "action": {"kind": "Noop"}},
    }


def test_the_oldest_live_policy_owns_the_driver() -> None:
    book = PolicyBook()
    book.observe(_policy("young", "2026-01-02T00:00:00Z"))
    book.observe(_policy("old", "2026-01-01T00:00:00Z", deletionTimestamp="2026-01-03T00:00:00Z"))
    owner = book.owner(FABRIC)
    assert owner is not None
    assert owner.name == "young", "a deleting policy gives way to a live one"
    book.forget(_policy("young", "2026-01-02T00:00:00Z"))
    owner = book.owner(FABRIC)
    assert owner is not None
    assert owner.name == "old", "with no live policy left, the deleting one still owns its records"


def test_rules_follow_the_evaluated_readiness() -> None:
    book = PolicyBook()
    state = book.observe(_policy("p", "2026-01-01T00:00:00Z"))
    assert not book.settled({FABRIC})
    state.evaluated_generation = 1
    state.ready = False
    state.not_ready_message = "missing permission"
    assert book.settled({FABRIC})
    rules = book.rules()[FABRIC]
    assert not rules.ready
    assert rules.not_ready_message == "missing permission"
    state.ready = True
    assert book.rules()[FABRIC].ready
    assert book.settled({"other.example.com"}), "drivers without a policy do not hold a claim back"


def test_a_new_generation_is_not_settled_until_evaluated() -> None:
    book = PolicyBook()
    state = book.observe(_policy("p", "2026-01-01T00:00:00Z"))
    state.evaluated_generation = 1
    body = _policy("p", "2026-01-01T00:00:00Z")
    body["metadata"]["generation"] = 2
    assert book.observe(body) is state, "the evaluation of the same object is kept"
    assert not book.settled({FABRIC})


def test_an_unreadable_policy_is_kept_with_its_driver_and_problem() -> None:
    book = PolicyBook()
    body = _policy("broken", "2026-01-01T00:00:00Z")
    body["spec"]["action"] = {"kind": "Teleport"}
    state = book.observe(body)
    assert state.policy is None
    assert state.driver == FABRIC
    assert "spec.action.kind" in state.parse_error
    assert not book.rules()[FABRIC].ready


def test_records_are_driven_by_their_own_policy_or_the_drivers_owner() -> None:
    book = PolicyBook()
    the_record = record()  # created by policy "fabric"
    owner = book.observe(_policy("other", "2026-01-01T00:00:00Z"))
    assert book.for_record(the_record) is None, "no accepted action yet"
    owner.action = object()
    assert book.for_record(the_record) is owner
    own = book.observe(_policy("fabric", "2026-01-02T00:00:00Z"))
    own.action = object()
    assert book.for_record(the_record) is own
