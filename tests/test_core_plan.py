"""The one executor of plans (operators.core.plan): order, tolerated answers, ends, and Together."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from operators.core.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, ApiError
from operators.core.events import WARNING, ObjectRef
from operators.core.plan import (
    Apply,
    Create,
    Delete,
    Evict,
    Patch,
    Plan,
    RecordEvent,
    Replace,
    Together,
    Write,
    Writer,
    execute,
    status_apply,
)
from operators.core.reconcile import Done, Requeue
from operators.core.resources import ApiResource

RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
POD = ObjectRef("v1", "Pod", "p", "ns", "uid-p")


class RecordingClient:
    """Records every call as (method, path, body); ``answers[path]`` raises on that path's calls."""

    def __init__(self, answers: dict[str, ApiError] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.answers = answers or {}
        self.in_flight = 0
        self.most_in_flight = 0

    async def _call(self, method: str, path: str, body: Any) -> Any:
        self.calls.append((method, path, body))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)
        finally:
            self.in_flight -= 1
        if path in self.answers:
            raise self.answers[path]
        return {"answered": path}

    async def create(self, path: str, body: dict[str, Any], **params: str) -> Any:
        return await self._call("POST", path, {**body, "params": params} if params else body)

    async def replace(self, path: str, body: dict[str, Any], **params: str) -> Any:
        return await self._call("PUT", path, {**body, "params": params})

    async def apply(
        self, path: str, body: dict[str, Any], field_manager: str, want_reply: bool = True
    ) -> Any:
        return await self._call("APPLY", path, {"manager": field_manager, "body": body})

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any,
        want_reply: bool,
        content_type: str = "",
        params: dict[str, str] | None = None,
    ) -> Any:
        if method == "PATCH":
            body = {"type": content_type, "body": body}
        if params:
            body = {**body, "params": params}
        answer = await self._call(method, path, body)
        return answer if want_reply else None
        return await self._call(method, path, body)


@dataclass
class RecordingEvents:
    recorded: list[tuple[ObjectRef, str, str, str]] = field(default_factory=list)

    def record(self, obj: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.recorded.append((obj, type_, reason, message))


@dataclass
class FakeWriter:
    client: RecordingClient = field(default_factory=RecordingClient)
    events: RecordingEvents = field(default_factory=RecordingEvents)
    field_manager: str = "dra-operators-test"


def writer(answers: dict[str, ApiError] | None = None) -> FakeWriter:
    return FakeWriter(RecordingClient(answers))


async def run(
    plan: Plan,
    fake: FakeWriter,
    written: list[Write] | None = None,
    ended: list[tuple[Write, ApiError]] | None = None,
) -> Any:
    # The fakes have the Writer's shape; the executor only calls what they record.
    as_writer: Writer = fake  # type: ignore[assignment]
    return await execute(
        plan,
        as_writer,
        written=None if written is None else written.append,
        ended=None if ended is None else lambda write, err: ended.append((write, err)),
    )


async def test_the_steps_run_in_order_and_the_plan_returns_its_result() -> None:
    fake = writer()
    plan = Plan(
        (
            Create(RULES, {"metadata": {"name": "r"}}),
            Patch(f"{RULES}/r", {"spec": {}}),
            Patch("/api/v1/namespaces/ns/pods/p/status", {"status": {}}, STRATEGIC_MERGE_PATCH),
            Delete(f"{RULES}/old", "uid-old"),
            RecordEvent(POD, WARNING, "Reason", "message"),
            Evict("ns", "p", "uid-p"),
            Apply("/apis/x/v1/things/t/status", {"status": {"a": 1}}),
        ),
        Requeue(5.0, "more to do"),
    )
    assert await run(plan, fake) == Requeue(5.0, "more to do")
    assert fake.client.calls == [
        ("POST", RULES, {"metadata": {"name": "r"}}),
        ("PATCH", f"{RULES}/r", {"type": "application/merge-patch+json", "body": {"spec": {}}}),
        (
            "PATCH",
            "/api/v1/namespaces/ns/pods/p/status",
            {"type": STRATEGIC_MERGE_PATCH, "body": {"status": {}}},
        ),
        (
            "DELETE",
            f"{RULES}/old",
            {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "uid-old"}},
        ),
        (
            "POST",
            "/api/v1/namespaces/ns/pods/p/eviction",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "p", "namespace": "ns"},
                "deleteOptions": {"preconditions": {"uid": "uid-p"}},
            },
        ),
        (
            "APPLY",
            "/apis/x/v1/things/t/status",
            {"manager": "dra-operators-test", "body": {"status": {"a": 1}}},
        ),
    ]
    assert fake.events.recorded == [(POD, WARNING, "Reason", "message")]


async def test_a_delete_can_name_its_propagation_policy() -> None:
    fake = writer()
    await run(Plan((Delete(f"{RULES}/old", "uid-old", propagation="Background"),)), fake)
    assert fake.client.calls == [
        (
            "DELETE",
            f"{RULES}/old",
            {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": "uid-old"},
                "params": {"propagationPolicy": "Background"},
            },
        )
    ]


async def test_replied_hears_the_answer_of_each_write_answered_2xx_only() -> None:
    fake = writer({"/gone": ApiError(404, "NotFound", "")})
    replies: list[tuple[Write, Any]] = []
    kept, gone = Patch("/kept", {"status": {}}), Patch("/gone", {})
    as_writer: Writer = fake  # type: ignore[assignment]
    await execute(Plan((kept, gone)), as_writer, replied=lambda write, reply: replies.append((write, reply)))
    assert replies == [(kept, {"answered": "/kept"})]


async def test_an_empty_plan_is_done() -> None:
    assert await run(Plan(), writer()) == Done()


@pytest.mark.parametrize(
    ("write", "status"),
    [
        (Create(RULES, {}), 409),
        (Apply("/w", {}), 404),
        (Patch("/w", {}), 404),
        (Delete("/w", "u"), 404),
        (Delete("/w", "u"), 409),
        (Evict("ns", "w", "u"), 404),
    ],
    ids=["create-exists", "apply-gone", "patch-gone", "delete-gone", "delete-namesake", "evict-gone"],
)
async def test_tolerated_answers_count_as_done_and_the_plan_goes_on(write: Write, status: int) -> None:
    path = "/api/v1/namespaces/ns/pods/w/eviction" if isinstance(write, Evict) else write.path
    fake = writer({path: ApiError(status, "", "")})
    written: list[Write] = []
    last = Apply("/after", {})
    assert await run(Plan((write, last)), fake, written) == Done()
    assert written == [write, last]
    assert fake.client.calls[-1][1] == "/after"


async def test_any_other_answer_is_raised_and_stops_the_plan() -> None:
    fake = writer({"/status": ApiError(409, "Conflict", "the object has been modified")})
    written: list[Write] = []
    with pytest.raises(ApiError) as raised:
        await run(Plan((Patch("/status", {}), Create(RULES, {}))), fake, written)
    assert raised.value.status == 409
    assert [path for _, path, _ in fake.client.calls] == ["/status"], "nothing after the failed write"
    assert written == []


async def test_an_answer_in_ends_ends_the_plan_with_its_result() -> None:
    fake = writer({"/status": ApiError(404, "NotFound", "")})
    plan = Plan((Apply("/status", {}, ends={404: Done("gone")}), Create(RULES, {})), Requeue(1.0))
    assert await run(plan, fake) == Done("gone")
    assert [path for _, path, _ in fake.client.calls] == ["/status"]


async def test_ends_may_tell_answers_apart_by_their_body_and_the_caller_hears_which_ended_it() -> None:
    """A 429 that names a budget ends the plan; another 429, with the same status, is raised."""

    def refused(err: ApiError) -> Requeue | None:
        return Requeue(5.0, "budget") if err.body.get("reason") == "budget" else None

    refusal = ApiError(429, "TooManyRequests", "", None, {"reason": "budget"})
    evict = Evict("ns", "p", "uid-p", ends=refused)
    plan = Plan((evict, RecordEvent(POD, WARNING, "Reason", "message")))
    fake = writer({"/api/v1/namespaces/ns/pods/p/eviction": refusal})
    written: list[Write] = []
    ended: list[tuple[Write, ApiError]] = []
    assert await run(plan, fake, written, ended) == Requeue(5.0, "budget")
    assert (written, ended, fake.events.recorded) == ([], [(evict, refusal)], [])

    busy = writer({"/api/v1/namespaces/ns/pods/p/eviction": ApiError(429, "TooManyRequests", "", 1.0, {})})
    with pytest.raises(ApiError):
        await run(plan, busy)


async def test_ends_is_looked_at_before_tolerate() -> None:
    fake = writer({"/w": ApiError(404, "NotFound", "")})
    written: list[Write] = []
    ended: list[tuple[Write, ApiError]] = []
    delete = Delete("/w", "u", ends={404: Done("gone")})
    assert await run(Plan((delete, Apply("/after", {}))), fake, written, ended) == Done("gone")
    assert written == []
    assert [write for write, _ in ended] == [delete]


async def test_together_sends_every_write_within_its_limit_before_the_next_step() -> None:
    fake = writer()
    creates = tuple(Create(RULES, {"n": i}) for i in range(10))
    written: list[Write] = []
    assert await run(Plan((Together(creates, 3), Apply("/status", {}))), fake, written) == Done()
    assert fake.client.most_in_flight == 3
    assert [body for _, _, body in fake.client.calls[:10]] == [{"n": i} for i in range(10)]
    assert fake.client.calls[-1][1] == "/status"
    assert len(written) == 11


async def test_together_answers_every_write_then_raises_the_first_failure() -> None:
    fake = writer({f"{RULES}/b": ApiError(500, "InternalError", "etcd")})
    writes = (Patch(f"{RULES}/a", {}), Patch(f"{RULES}/b", {}), Patch(f"{RULES}/c", {}))
    written: list[Write] = []
    with pytest.raises(ApiError):
        await run(Plan((Together(writes, 32), Apply("/status", {}))), fake, written)
    assert [path for _, path, _ in fake.client.calls] == [f"{RULES}/a", f"{RULES}/b", f"{RULES}/c"]
    assert written == [writes[0], writes[2]], "the others were done, and counted"


async def test_together_ends_with_the_result_of_an_ending_answer_once_all_are_answered() -> None:
    fake = writer({"/pods/a": ApiError(429, "TooManyRequests", "budget")})
    writes = (Delete("/pods/a", "u", ends={429: Requeue(10.0)}), Delete("/pods/b", "u"))
    assert await run(Plan((Together(writes, 2), Apply("/status", {}))), fake) == Requeue(10.0)
    assert [path for _, path, _ in fake.client.calls] == ["/pods/a", "/pods/b"]


def test_status_apply_writes_the_whole_status_of_one_incarnation() -> None:
    resource = ApiResource("dra-operators.io", "v1alpha1", "things", namespaced=False)
    write = status_apply(resource, "Thing", "t", "uid-1", {"observedGeneration": 1})
    assert write.path == "/apis/dra-operators.io/v1alpha1/things/t/status"
    assert write.body == {
        "apiVersion": "dra-operators.io/v1alpha1",
        "kind": "Thing",
        "metadata": {"name": "t", "uid": "uid-1"},
        "status": {"observedGeneration": 1},
    }
    assert (write.uid, write.ends) == ("uid-1", {})
    gone = status_apply(resource, "Thing", "t", "uid-1", {}, ends={404: Done("gone")})
    assert gone.ends == {404: Done("gone")}


def _namesake_refusal(field: str = "metadata.uid") -> ApiError:
    """What kube-apiserver answers an update that would change ``field`` (``rest.BeforeUpdate``)."""
    cause = {"reason": "FieldValueInvalid", "message": "field is immutable", "field": field}
    return ApiError(422, "Invalid", f"{field}: field is immutable", None, {"details": {"causes": [cause]}})


async def test_a_patch_or_an_apply_with_a_uid_sends_it_among_the_metadata_it_has() -> None:
    patch = Patch("/p", {"metadata": {"labels": {"k": "v"}}, "spec": {"x": 1}}, uid="u-1")
    apply = Apply("/a/status", {"metadata": {"name": "a"}, "status": {}}, uid="u-2")
    fake = writer()
    await run(Plan((patch, apply, Patch("/q", {"spec": {}}))), fake)
    assert [body for _, _, body in fake.client.calls] == [
        {"type": MERGE_PATCH, "body": {"metadata": {"labels": {"k": "v"}, "uid": "u-1"}, "spec": {"x": 1}}},
        {"manager": "dra-operators-test", "body": {"metadata": {"name": "a", "uid": "u-2"}, "status": {}}},
        {"type": MERGE_PATCH, "body": {"spec": {}}},
    ]


async def test_a_namesakes_refusal_of_the_uid_counts_as_the_writes_404() -> None:
    """The object the write was meant for is gone: tolerated where 404 is, ending the plan where 404
    ends it, and heard as the refusal it was."""
    fake = writer({"/p": _namesake_refusal(), "/a/status": _namesake_refusal()})
    written: list[Write] = []
    ended: list[tuple[Write, ApiError]] = []
    patch = Patch("/p", {}, uid="u-1")
    apply = Apply("/a/status", {}, ends={404: Done("gone")}, uid="u-2")
    plan = Plan((patch, apply, Create(RULES, {})), Requeue(1.0))
    assert await run(plan, fake, written, ended) == Done("gone")
    assert written == [patch]
    assert [(write, err.status) for write, err in ended] == [(apply, 422)]
    assert [path for _, path, _ in fake.client.calls] == ["/p", "/a/status"]


@pytest.mark.parametrize(
    ("write", "refusal"),
    [
        (Patch("/p", {}), _namesake_refusal()),
        (Patch("/p", {}, uid="u-1"), _namesake_refusal("spec.taint.value")),
        (Patch("/p", {}, uid="u-1"), ApiError(422, "Invalid", "no causes")),
    ],
    ids=["no-uid-sent", "another-field", "no-causes"],
)
async def test_any_other_refusal_is_raised(write: Write, refusal: ApiError) -> None:
    with pytest.raises(ApiError) as raised:
        await run(Plan((write,)), writer({"/p": refusal}))
    assert raised.value is refusal


async def test_a_create_names_the_field_manager_only_when_asked() -> None:
    fake = writer()
    await run(Plan((Create("/a", {"k": 1}), Create("/b", {"k": 2}, field_manager=True))), fake)
    assert fake.client.calls == [
        ("POST", "/a", {"k": 1}),
        ("POST", "/b", {"k": 2, "params": {"fieldManager": "dra-operators-test"}}),
    ]


async def test_an_apply_is_sent_as_its_own_field_manager_where_it_names_one() -> None:
    fake = writer()
    await run(Plan((Apply("/a", {"k": 1}), Apply("/b", {"k": 2}, manager="driver-x"))), fake)
    assert fake.client.calls == [
        ("APPLY", "/a", {"manager": "dra-operators-test", "body": {"k": 1}}),
        ("APPLY", "/b", {"manager": "driver-x", "body": {"k": 2}}),
    ]


async def test_a_replace_is_a_put_naming_the_field_manager_and_tolerates_404() -> None:
    fake = writer({"/gone": ApiError(404, "NotFound", "")})
    assert await run(Plan((Replace("/gone", {}), Replace("/kept", {"k": 1}))), fake) == Done()
    assert fake.client.calls[-1] == (
        "PUT",
        "/kept",
        {"k": 1, "params": {"fieldManager": "dra-operators-test"}},
    )


async def test_a_refused_replace_is_sent_again_by_its_resend_whose_answer_counts() -> None:
    refusal = ApiError(422, "Invalid", "spec is immutable")
    fake = writer({"/claim": refusal})
    resent: list[tuple[str, str, Any, ApiError]] = []

    async def resend(client: Any, manager: str, path: str, body: Any, refused: ApiError) -> Any:
        resent.append((manager, path, body, refused))
        return {"resent": path}

    replies: list[Any] = []
    as_writer: Writer = fake  # type: ignore[assignment]
    plan = Plan((Replace("/claim", {"k": 1}, resend=resend),), Requeue(5))
    assert await execute(plan, as_writer, replied=lambda _, reply: replies.append(reply)) == Requeue(5)
    assert resent == [("dra-operators-test", "/claim", {"k": 1}, refusal)]
    assert replies == [{"resent": "/claim"}]


async def test_a_resend_that_raises_the_refusal_leaves_it_to_ends() -> None:
    refusal = ApiError(409, "Conflict", "changed")

    async def resend(client: Any, manager: str, path: str, body: Any, refused: ApiError) -> Any:
        raise refused

    plan = Plan((Replace("/claim", {}, resend=resend, ends={409: Done("conflict")}),))
    assert await run(plan, writer({"/claim": refusal})) == Done("conflict")
