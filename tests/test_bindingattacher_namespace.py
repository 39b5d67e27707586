"""A DeviceAttachPolicy is not Ready while the operator namespace, which holds the ledger, is
missing (instead of Ready=True and a 404 per attachment), and becomes Ready once it exists."""

from __future__ import annotations

from typing import Any

from bindingattacher_builders import FABRIC, attacher
from runtime_support import drain

from operators.bindingattacher import policy
from operators.bindingattacher.cache import POLICY
from operators.bindingattacher.controller import SWEEP_KEY
from operators.core.conditions import Condition
from operators.core.keys import Key
from operators.core.namespace import Presence, Problem
from operators.core.reconcile import Done

MISSING = Problem("NamespaceMissing", 'namespace "dra-operators" does not exist (...)')


class FakeClient:
    """Answers the policy sync's calls: the access review, the finalizer patch, the status apply,
    and the Events."""

    def __init__(self) -> None:
        self.statuses: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    async def create(self, path: str, body: dict[str, Any], **params: str) -> Any:
        if path.endswith("/events"):
            self.events.append(body)
            return body
        assert path.endswith("/selfsubjectaccessreviews")
        return {"status": {"allowed": True}}

    async def request(self, method: str, path: str, *, body: Any = None, **params: Any) -> Any:
        assert method == "PATCH", "the finalizer patch is the only write sent through request"
        return {"metadata": {**body["metadata"], "resourceVersion": "2"}}

    async def apply(
        self, path: str, body: dict[str, Any], field_manager: str, force: bool = True, want_reply: bool = True
    ) -> Any:
        self.statuses.append(body["status"])
        return body


def ready_of(status: dict[str, Any]) -> tuple[str, str, str]:
    found = next(c for c in status["conditions"] if c["type"] == policy.READY)
    return found["status"], found["reason"], found["message"]


async def test_policy_ready_follows_the_namespace() -> None:
    client = FakeClient()
    controller = attacher(client, Presence.MISSING)
    runtime = controller.runtime
    namespace = runtime.own_namespace
    assert namespace is not None
    controller.upsert_policy(
        {
            "metadata": {"name": "fabric", "uid": "u1", "generation": 1, "resourceVersion": "1"},
            "spec": {
                "driver": FABRIC,
                "bindingTimeout": "30s",
                "safetyMargin": "8s",
                "action": {"kind": "Noop"},
            },
        }
    )
    await controller.sync(Key(POLICY, "", "fabric"))
    status, reason, message = ready_of(client.statuses[-1])
    assert (status, reason) == ("False", "NamespaceMissing")
    assert message.startswith(
        'namespace "dra-operators" does not exist (it holds the DeviceAttachment ledger)'
    )
    assert "kubectl create namespace dra-operators" in message
    state = controller.shared.cache.policies.get("fabric")
    assert state is not None
    assert not state.ready
    assert state.not_ready_message == message  # the text of the claims' AttachPolicyNotReady Event

    await drain(runtime.queue)  # the keys queued by the first sync
    namespace.update(Presence.PRESENT)
    key = await runtime.queue.get()
    assert key == Key(POLICY, "", "fabric")
    runtime.queue.done(key)
    await controller.sync(key)
    assert ready_of(client.statuses[-1])[:2] == ("True", "Ready")
    assert state.ready
    await runtime.events.drain(1.0)


def test_the_namespace_comes_before_the_policys_own_problems() -> None:
    accepted = Condition(type=policy.ACCEPTED, status="False", reason="SecretNotFound", message="no secret")
    authorized = policy.authorized_condition(FABRIC, True, 1)
    ready = policy.ready_condition(accepted, authorized, False, 1, MISSING)
    assert (ready.status, ready.reason, ready.message) == ("False", MISSING.reason, MISSING.message)
    terminating = policy.ready_condition(accepted, authorized, True, 1, MISSING)
    assert terminating.reason == "Terminating"
    assert policy.ready_condition(accepted, authorized, False, 1).reason == "NotAccepted"


async def test_the_sweep_is_periodic_work_queued_at_start_every_resync_period() -> None:
    controller = attacher(FakeClient(), Presence.PRESENT)
    queue = controller.runtime.queue
    assert list(queue._queue) == [SWEEP_KEY], "queued at once: it runs when the queue opens"
    assert queue._periodic[SWEEP_KEY][0] == 300.0, "--resync-period, 5m by default"
    assert await controller.sync(SWEEP_KEY) == Done(), "the queue re-arms it, not a Requeue"
