"""Event de-duplication (identical messages) and aggregation (similar messages)."""

from __future__ import annotations

import re
from typing import Any, cast

import pytest

from operators.core.backoff import Backoff
from operators.core.client import ApiError, KubeClient
from operators.core.events import (
    COMBINED_PREFIX,
    SIMILAR_LIMIT,
    SPAM_BURST,
    EventRecorder,
    ObjectRef,
    event_name,
)


class Recording:
    """Records the bodies sent; ``refusals[verb]`` are raised, in turn, after the request was
    recorded (an answer lost on the way back looks the same to the sender)."""

    def __init__(self) -> None:
        self.creates: list[dict[str, Any]] = []
        self.patches: list[dict[str, Any]] = []
        self.patched: list[str] = []
        self.refusals: dict[str, list[ApiError]] = {"create": [], "patch": []}

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        self.creates.append(body)
        if self.refusals["create"]:
            raise self.refusals["create"].pop(0)
        return body

    async def patch(self, path: str, body: dict[str, Any], content_type: str = "") -> Any:
        self.patches.append(body)
        self.patched.append(path)
        if self.refusals["patch"]:
            raise self.refusals["patch"].pop(0)
        return body


POD = ObjectRef("v1", "Pod", "p", "ns", "uid-1")


async def test_identical_events_increment_one_count() -> None:
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    for _ in range(3):
        await recorder.emit(POD, "Warning", "Failed", "template missing")
    assert len(client.creates) == 1
    assert client.creates[0]["source"] == {"component": "dra-operators-test"}
    assert [p["count"] for p in client.patches] == [2, 3]


async def test_similar_events_are_combined_after_the_limit() -> None:
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    for i in range(SIMILAR_LIMIT + 5):
        await recorder.emit(POD, "Warning", "Failed", f"claim x-{i} is forbidden")
    messages = [c["message"] for c in client.creates]
    assert len(messages) == SIMILAR_LIMIT + 1, "ten Events, then one combined Event"
    assert messages[-1] == COMBINED_PREFIX + f"claim x-{SIMILAR_LIMIT} is forbidden"
    assert client.patches[-1]["message"] == COMBINED_PREFIX + f"claim x-{SIMILAR_LIMIT + 4} is forbidden"
    assert client.patches[-1]["count"] == 5


async def test_recorded_events_are_posted_in_order_without_blocking_the_caller() -> None:
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    for reason in ("First", "Second", "Third"):
        recorder.record(POD, "Normal", reason, "message")
    assert client.creates == [], "record() returns before anything is posted"
    await recorder.drain(5)
    assert [c["reason"] for c in client.creates] == ["First", "Second", "Third"]


async def test_a_full_backlog_drops_events_instead_of_growing(monkeypatch: Any) -> None:
    monkeypatch.setattr("operators.core.events.BACKLOG_LIMIT", 2)
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    dropped: list[int] = []
    recorder.on_dropped = lambda: dropped.append(1)
    for reason in ("A", "B", "C"):
        recorder.record(POD, "Normal", reason, "message")
    await recorder.drain(5)
    assert [c["reason"] for c in client.creates] == ["A", "B"]
    assert len(dropped) == 1, "the operator's metric hears of the dropped Event"


async def test_every_event_of_an_object_with_a_maximal_name_gets_its_own_name() -> None:
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    # Cut at 242 characters, the name would end in a dot.
    longest = ObjectRef("v1", "Pod", "p" * 241 + "." + "q" * 11, "ns", "uid-2")
    for reason in ("First", "Second"):
        await recorder.emit(longest, "Warning", reason, "message")
    names = [c["metadata"]["name"] for c in client.creates]
    assert len(set(names)) == 2, names
    for name in names:
        assert len(name) <= 253
        assert name.startswith("p" * 240)
        # A DNS subdomain: the shortened object name ends in an alphanumeric, then the suffix.
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name), name
    assert event_name("short").startswith("short.")


async def test_a_message_past_the_api_limit_is_posted_cut_to_it() -> None:
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    long = "é" * 1000  # 2000 bytes; kube-apiserver counts an Event's message in bytes, at most 1024
    await recorder.emit(POD, "Warning", "Failed", long)
    await recorder.emit(POD, "Warning", "Failed", long + "and more")
    (posted,) = client.creates
    assert len(posted["message"].encode()) <= 1024
    assert posted["message"] == "é" * 510 + "..."
    assert [p["count"] for p in client.patches] == [2], "texts that differ past the limit are one Event"


async def test_a_combined_message_is_cut_with_its_prefix() -> None:
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    for i in range(SIMILAR_LIMIT + 1):
        recorder.record(POD, "Warning", "Failed", f"{i:02d}" + "x" * 2000)
    await recorder.drain(5)
    combined = client.creates[-1]["message"]
    assert combined.startswith(COMBINED_PREFIX + f"{SIMILAR_LIMIT:02d}xxx")
    assert len(combined.encode()) <= 1024


async def test_an_event_gone_from_the_server_is_created_again_by_the_occurrence_that_finds_it_gone() -> None:
    """kube-apiserver deletes an Event an hour (``--event-ttl``) after it last changed."""
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    await recorder.emit(POD, "Warning", "Failed", "template missing")
    client.refusals["patch"].append(ApiError(404, "NotFound", 'events "p.x" not found'))
    await recorder.emit(POD, "Warning", "Failed", "template missing")
    assert len(client.creates) == 2, "the occurrence that found the Event gone is posted"
    await recorder.emit(POD, "Warning", "Failed", "template missing")
    assert client.patched[-1].endswith("/" + client.creates[1]["metadata"]["name"])
    assert client.patches[-1]["count"] == 2


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("operators.core.events.SEND_RETRY", Backoff(0.001))


@pytest.mark.usefixtures("quick_retries")
async def test_an_event_the_api_server_did_not_answer_is_sent_again_under_the_same_name() -> None:
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    # Created, but the answer was lost: the second attempt finds its own Event.
    client.refusals["create"] += [ApiError(0, "", "connection reset"), ApiError(409, "AlreadyExists", "")]
    recorder.record(POD, "Warning", "Failed", "template missing")
    await recorder.drain(5)
    first, again = client.creates
    assert again["metadata"]["name"] == first["metadata"]["name"]
    client.refusals["patch"].append(ApiError(503, "ServiceUnavailable", "etcd"))
    recorder.record(POD, "Warning", "Failed", "template missing")
    await recorder.drain(5)
    assert [p["count"] for p in client.patches] == [2, 2], "a patch sent again counts the occurrence once"
    assert {path.rsplit("/", 1)[1] for path in client.patched} == {first["metadata"]["name"]}


@pytest.mark.usefixtures("quick_retries")
async def test_an_event_the_server_refuses_is_not_sent_again() -> None:
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    terminating = {"details": {"causes": [{"reason": "NamespaceTerminating"}]}}
    client.refusals["create"].append(ApiError(403, "Forbidden", "being terminated", None, terminating))
    recorder.record(POD, "Warning", "Failed", "template missing")
    await recorder.drain(5)
    assert len(client.creates) == 1


async def test_one_object_gets_a_burst_of_writes_then_one_per_five_minutes_carrying_the_count() -> None:
    """A tenant that makes a pod fail many times a second costs Event writes at client-go's pace."""
    client = Recording()
    recorder = EventRecorder(cast(KubeClient, client), "dra-operators-test")
    now = [1000.0]
    recorder.clock = lambda: now[0]
    for _ in range(SPAM_BURST + 20):
        await recorder.emit(POD, "Warning", "Failed", "template missing")
    assert len(client.creates) + len(client.patches) == SPAM_BURST
    other = ObjectRef("v1", "Pod", "q", "ns", "uid-q")
    await recorder.emit(other, "Warning", "Failed", "template missing")
    assert len(client.creates) == 2, "another object has a budget of its own"
    now[0] += 300
    await recorder.emit(POD, "Warning", "Failed", "template missing")
    assert client.patches[-1]["count"] == SPAM_BURST + 21, "the occurrences not written are counted"
    await recorder.emit(POD, "Warning", "Failed", "template missing")
    assert client.patches[-1]["count"] == SPAM_BURST + 21
