"""Kubernetes-style conditions (metav1.Condition), written once for every operator.

``lastTransitionTime`` changes only when ``status`` changes, as the API conventions require;
reason, message and observedGeneration are updated in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import Field

from .models import KubeModel

TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"

LATEST_TIME = datetime.max.replace(tzinfo=UTC)
"""The last moment a datetime holds: where :func:`time_after` saturates."""


def now_rfc3339() -> str:
    return format_time(datetime.now(UTC))


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime:
    """``value``, an RFC 3339 time as the API writes it (metav1.Time, MicroTime), in UTC.

    Raises ValueError for what it cannot read and for a time without a zone: the API server
    never writes one, and a naive datetime would raise TypeError where it meets an aware one.
    """
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"time without a zone: {value!r}")
    try:
        return moment.astimezone(UTC)
    except OverflowError as err:  # year 1 or 9999 pushed out of range by its offset
        raise ValueError(f"time out of range: {value!r}") from err


def parse_time_or_none(value: object) -> datetime | None:
    """``value`` read as :func:`parse_time` does; None when it is unset, not a string, or unreadable.

    Go's zero time (year 1, what an unset time.Time serializes as) counts as unset: no
    Kubernetes object was written then.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = parse_time(value)
    except ValueError:
        return None
    return None if moment.year == 1 else moment


def time_after(moment: datetime, duration: timedelta | float) -> datetime:
    """``moment`` plus ``duration`` (a timedelta or seconds), saturating where a datetime ends:
    :data:`LATEST_TIME` for a sum past year 9999.

    Times and durations read from objects are as large as their writers like (a ``timeAdded`` in
    year 9999, a ``tolerationSeconds`` near 2**63, a duration of a billion hours): a deadline past
    year 9999 means "later than anything", never an OverflowError that fails the sync.
    """
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
    try:
        step = duration if isinstance(duration, timedelta) else timedelta(seconds=duration)
        return moment + step
    except OverflowError:
        return LATEST_TIME if seconds > 0 else datetime.min.replace(tzinfo=UTC)


class Condition(KubeModel):
    type: str
    status: str
    reason: str
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: str = Field(default_factory=now_rfc3339)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class ObservedCondition(KubeModel):
    """A condition as read back from the API, where any field may be missing.

    The transition time is parsed, because readers compute with it (throttles, ages).
    """

    type: str
    status: str = ""
    reason: str = ""
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: datetime | None = None

    @classmethod
    def written(cls, condition: Condition) -> ObservedCondition:
        """``condition`` as the API returns it once written, for overlaying a write on a cache."""
        return cls.model_validate(condition.to_dict())


ConditionLike = Mapping[str, Any] | KubeModel
"""A condition as a raw API dict or as a model of one (camelCase aliases, as :class:`Condition`)."""


def find(conditions: Iterable[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    for cond in conditions or ():
        if cond.get("type") == type_:
            return cond
    return None


def current(
    condition: ConditionLike | None, generation: int | None, status: Mapping[str, Any] | None = None
) -> bool:
    """Whether ``condition`` (of ``status``) may describe spec ``generation``: it is stale only when
    it says it describes an older one, by its own observedGeneration, else its status's.

    This is how kubectl wait reads a condition. The field is optional: a writer that does not set
    it says nothing about the spec it saw, and a reader that waited for it would wait forever. A
    newer one than ``generation`` means the copy of the object at hand is the older part."""
    if condition is None:
        return False
    if isinstance(condition, Mapping):
        observed = condition.get("observedGeneration")
    else:
        observed = getattr(condition, "observed_generation", None)
    if observed is None and status is not None:
        observed = status.get("observedGeneration")
    return generation is None or observed is None or observed >= generation


def reported(status: Mapping[str, Any], type_: str, value: str, reason: str, generation: int) -> bool:
    """Whether ``status`` already says condition ``type_`` is ``value`` for ``reason`` at
    ``generation`` (:func:`current`): a Warning Event is recorded when that changes, so once per
    generation that is still wrong, not again on every pass."""
    previous = find(status.get("conditions"), type_)
    seen = previous is not None and previous.get("status") == value and previous.get("reason") == reason
    return seen and current(previous, generation, status)


def merge(
    existing: Iterable[Mapping[str, Any]] | None,
    new: Condition,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """Return ``existing`` with ``new`` set, keeping the transition time when status is unchanged."""
    result: list[dict[str, Any]] = []
    replaced = False
    for cond in existing or ():
        if cond.get("type") != new.type:
            result.append(dict(cond))
            continue
        replaced = True
        entry = new.to_dict()
        if cond.get("status") == new.status and cond.get("lastTransitionTime"):
            entry["lastTransitionTime"] = cond["lastTransitionTime"]
        elif now is not None:
            entry["lastTransitionTime"] = now
        result.append(entry)
    if not replaced:
        entry = new.to_dict()
        if now is not None:
            entry["lastTransitionTime"] = now
        result.append(entry)
    return result


def set_observed(
    existing: Iterable[Mapping[str, Any]] | None,
    generation: int | None,
    conditions: Iterable[Condition],
    now: str | None = None,
) -> list[dict[str, Any]]:
    """``existing`` with each of ``conditions`` set in turn (:func:`merge`), each as observed at
    ``generation``: every condition a status writes describes the same generation of the spec."""
    result = [dict(condition) for condition in existing or ()]
    for condition in conditions:
        result = merge(result, condition.model_copy(update={"observed_generation": generation}), now)
    return result


_CONTENT_KEYS = ("type", "status", "reason", "message", "observedGeneration")


def same_content(a: ConditionLike | None, b: ConditionLike | None) -> bool:
    """Whether two conditions differ only in lastTransitionTime (so a write can be skipped)."""
    if a is None or b is None:
        return a is b
    return _content(a) == _content(b)


def status_differs(previous: Mapping[str, Any], new: Mapping[str, Any], fields: Iterable[str]) -> bool:
    """Whether the ``new`` status says anything ``previous`` does not, in ``fields`` or in its
    conditions; transition times alone do not count, so a pass that changes nothing writes nothing."""
    if any(previous.get(key) != new.get(key) for key in fields):
        return True
    old_conditions = {c.get("type"): c for c in previous.get("conditions") or ()}
    new_conditions = {c.get("type"): c for c in new.get("conditions") or ()}
    if old_conditions.keys() != new_conditions.keys():
        return True
    return not all(same_content(old_conditions[key], new_conditions[key]) for key in new_conditions)


def _content(condition: ConditionLike) -> tuple[Any, ...]:
    fields = condition.model_dump(by_alias=True) if isinstance(condition, KubeModel) else condition
    return tuple(fields.get(key) for key in _CONTENT_KEYS)
