"""The two checks every operator's tombstone tests make, and the scope operators' check of an
update they cannot read (:func:`unreadable_update_test`). After a 410 Gone re-list (or, for the
project's own kinds, the re-list at start) an object that vanished in the gap reaches its delete
handler as a tombstone: kind, name, namespace and UID only.

``outcome_of(delete, body)`` builds a fresh controller holding the object, calls
``delete(controller, body)`` and returns what can be observed of the result; ``cached_in`` names
the part of that outcome (a mapping of lists) that holds the object under ``key``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import pytest

from operators.core.models import tombstone


class Observed(Protocol):
    @property
    def cached(self) -> Mapping[str, list[str]]: ...


Delete = Callable[[Any, Mapping[str, Any]], None]
OutcomeOf = Callable[[Delete, Mapping[str, Any]], Awaitable[Observed]]


async def assert_tombstone_deletes_as_the_full_object(
    outcome_of: OutcomeOf, delete: Delete, body: Mapping[str, Any], cached_in: str, key: str
) -> None:
    full = await outcome_of(delete, body)
    gap = await outcome_of(delete, tombstone(body))
    assert gap == full
    assert key not in gap.cached[cached_in]


async def assert_an_earlier_objects_tombstone_changes_nothing(
    outcome_of: OutcomeOf, delete: Delete, body: Mapping[str, Any], cached_in: str, key: str
) -> None:
    """The cache holds the object's successor (another UID), listed before the re-list hands over
    its predecessor's tombstone."""

    def nothing(_controller: Any, _body: Mapping[str, Any]) -> None:
        pass

    earlier = {**body, "metadata": {**body["metadata"], "uid": "uid-earlier"}}
    untouched = await outcome_of(nothing, earlier)
    assert await outcome_of(delete, tombstone(earlier)) == untouched
    assert key in untouched.cached[cached_in]


Check = Callable[[Delete, dict[str, Any], str, str], Awaitable[None]]


def tombstone_tests(outcome_of: OutcomeOf, kinds: Sequence[Any]) -> tuple[Check, Check]:
    """Both checks as tests over ``kinds`` (delete, body, cached_in, key), for a module to name:
    ``test_a, test_b = tombstone_tests(outcome_of, KINDS)``."""
    parametrize = pytest.mark.parametrize(("delete", "body", "cached_in", "key"), kinds)

    @parametrize
    async def deletes_as_the_full_object(
        delete: Delete, body: dict[str, Any], cached_in: str, key: str
    ) -> None:
        await assert_tombstone_deletes_as_the_full_object(outcome_of, delete, body, cached_in, key)

    @parametrize
    async def earlier_changes_nothing(delete: Delete, body: dict[str, Any], cached_in: str, key: str) -> None:
        await assert_an_earlier_objects_tombstone_changes_nothing(outcome_of, delete, body, cached_in, key)

    return deletes_as_the_full_object, earlier_changes_nothing


Upsert = Callable[[Any, Mapping[str, Any]], None]


def watched(controller: type, kind: str, body: Mapping[str, Any], broken: str, id: str | None = None) -> Any:
    """One watched kind of a scope operator's controller (devicehealth, taintselector): its
    ``upsert_<kind>`` and ``delete_<kind>`` callbacks, an object of it, and the field that, set to
    a string, makes an update of it unreadable."""
    update, delete = getattr(controller, f"upsert_{kind}"), getattr(controller, f"delete_{kind}")
    return pytest.param(update, delete, body, broken, id=id or kind)


def unreadable_update_test(outcome_of: OutcomeOf, kinds: Sequence[Any], logger: str) -> Any:
    """A test over ``kinds`` (from :func:`watched`): an update the controller cannot read changes
    what the deletion of the object changes (the cache must not go on deciding on a version that
    has since changed, and the owners whose pass read it run again), and the log names the object
    it skipped, once."""

    @pytest.mark.parametrize(("update", "delete", "body", "broken"), kinds)
    async def unreadable_is_deleted(
        update: Upsert, delete: Delete, body: dict[str, Any], broken: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        deleted = await outcome_of(delete, body)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=logger):
            unreadable = await outcome_of(update, {**body, broken: "not an object"})
        assert unreadable == deleted
        skipped = [r.getMessage() for r in caplog.records if "cannot be parsed" in r.getMessage()]
        assert len(skipped) == 1
        assert body["metadata"]["name"] in skipped[0]

    return unreadable_is_deleted
