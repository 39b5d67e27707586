"""Properties of a DeviceHealthPolicy over many passes: the operator that taints, and so evicts.

A policy is run pass after pass against a changing world (devices turning unhealthy and healthy,
time moving on), each plan's rule writes carried out on the world before the next pass, as the
API server would. Whatever the world, every pass must keep the promises of docs/device-health.md:

- the blast-radius guard: a pass that creates a rule leaves at most ``maxUnavailable`` devices
  tainted, over the scope and, for a percentage, per pool; a device is held back only when there
  is no free place;
- a rule is created only for a device of the scope whose signal has held for ``after``, and never
  under a name another owner holds (that device is listed ``Conflict``);
- a rule is deleted only when it is the policy's own, with its UID, and its device has been quiet
  for ``clearAfter``;
- the longest signalled devices take the free places first;
- the dry run (effect ``None``) creates and patches nothing;
- a pass comes back no later than the moment the signal of an untainted device ripens;
- the plan does not depend on the order in which slices and rules were listed.

Examples per property (the ``unit`` profile; ``thorough`` runs ten times as many):

- ``test_every_pass_keeps_the_guard_and_the_signal_rules``: 300
- ``test_the_plan_does_not_depend_on_listing_order``: 75
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from random import Random
from typing import Any

from devicehealth_builders import GPU, POLICY_UID, RULES_API, at, device, policy, resource_slice, rule, writes
from hypothesis import given
from hypothesis import strategies as st
from strategies import examples

from operators.core.plan import Apply, Create, Delete, Patch, Plan
from operators.core.reconcile import Requeue
from operators.devicehealth.decide import MINIMUM_REQUEUE, Decision, View, decide, held_from
from operators.devicehealth.models import DeviceTaintRule, HealthPolicy
from operators.devicehealth.signals import Track
from operators.dra.pools import DeviceId
from operators.dra.selection import Selection
from operators.dra.taintrules import owned_rule_name

NAME = "gpu-health"
OTHER_POLICY_UID = "7d3b2a10-0000-4000-8000-000000000002"


@dataclass(frozen=True)
class Limit:
    """``maxUnavailable`` as the test reads it, apart from the operator's own arithmetic."""

    value: int
    percent: bool

    def spec(self) -> int | str:
        return f"{self.value}%" if self.percent else self.value

    def of(self, size: int) -> int:
        if not self.percent:
            return self.value
        return 0 if self.value == 0 else max(1, size * self.value // 100)


@dataclass(frozen=True)
class Step:
    seconds: int
    """How long after the previous pass this one runs."""
    toggled: frozenset[DeviceId]
    """Devices whose health flips just before this pass."""


@dataclass(frozen=True)
class World:
    pools: dict[str, int]
    """Pool name -> number of devices (``gpu-0`` ...)."""
    scope: tuple[DeviceId, ...]
    limit: Limit
    after: int
    clear_after: int | None
    """None: ``Never``."""
    effect: str
    taken: dict[DeviceId, str | None]
    """Devices whose rule name another owner holds: None for a user's rule, else a policy's UID."""
    steps: tuple[Step, ...]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    pools = {f"node-{i}": draw(st.integers(1, 6)) for i in range(draw(st.integers(1, 3)))}
    every = tuple(DeviceId(GPU, pool, f"gpu-{i}") for pool, size in pools.items() for i in range(size))
    scope = tuple(sorted(draw(st.just(set(every)) | st.sets(st.sampled_from(every), min_size=1))))
    percent = draw(st.booleans())
    # Mostly tight limits, which hold devices back and so test the guard.
    if percent:
        limit = Limit(draw(st.sampled_from([10, 25, 34, 50]) | st.integers(0, 100)), percent)
    else:
        limit = Limit(draw(st.integers(0, min(2, len(scope))) | st.integers(0, len(scope))), percent)
    taken = draw(
        st.dictionaries(st.sampled_from(every), st.sampled_from([None, OTHER_POLICY_UID]), max_size=2)
    )
    steps = draw(
        st.lists(
            st.builds(Step, st.integers(0, 40), st.frozensets(st.sampled_from(every), max_size=4)),
            min_size=1,
            max_size=8,
        )
    )
    return World(
        pools=pools,
        scope=scope,
        limit=limit,
        after=draw(st.integers(0, 30)),
        clear_after=draw(st.none() | st.integers(0, 60)),
        effect=draw(st.sampled_from(["NoExecute", "NoSchedule", "None"])),
        taken=taken,
        steps=tuple(steps),
    )


@dataclass
class Cluster:
    """What the API server holds between passes: the signals on the slices, the policy's rules."""

    world: World
    unhealthy_since: dict[DeviceId, datetime] = field(default_factory=dict)
    rules: dict[str, DeviceTaintRule] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)

    def policy(self) -> HealthPolicy:
        world = self.world
        return policy(
            name=NAME,
            max_unavailable=world.limit.spec(),
            after=f"{world.after}s",
            action={
                "effect": world.effect,
                "clearAfter": "Never" if world.clear_after is None else f"{world.clear_after}s",
            },
            status=self.status,
        )

    def view(self, shuffle: Random | None = None) -> View:
        slices = [
            resource_slice(
                pool,
                *(
                    device(
                        f"gpu-{i}", unhealthy_since=self.unhealthy_since.get(DeviceId(GPU, pool, f"gpu-{i}"))
                    )
                    for i in range(size)
                ),
            )
            for pool, size in self.world.pools.items()
        ]
        rules = list(self.rules.values())
        if shuffle is not None:
            shuffle.shuffle(slices)
            shuffle.shuffle(rules)
        controllers: dict[str, str | None] = {
            owned_rule_name(NAME, dev): holder for dev, holder in self.world.taken.items()
        }
        controllers.update(dict.fromkeys(self.rules, POLICY_UID))
        return View(slices=slices, rules=rules, rule_controllers=controllers)

    def flip(self, devices: frozenset[DeviceId], now: datetime) -> None:
        """Turn healthy devices unhealthy (their slice taint added now) and unhealthy ones healthy."""
        for dev in devices:
            if self.unhealthy_since.pop(dev, None) is None:
                self.unhealthy_since[dev] = now.replace(microsecond=0)

    def tainted(self) -> set[DeviceId]:
        return {r.device for r in self.rules.values() if r.device is not None}

    def carry_out(self, plan: Plan) -> None:
        for write in writes(plan):
            if isinstance(write, Create):
                made = rule(_device_of(write), policy_name=NAME)
                self.rules[made.metadata.name] = made
            elif isinstance(write, Delete):
                name = write.path.rsplit("/", 1)[1]
                assert write.uid == self.rules[name].metadata.uid, "a delete names the rule's own UID"
                del self.rules[name]
        applied = [step for step in plan.steps if isinstance(step, Apply)]
        if applied:
            self.status = dict(applied[-1].body["status"])


def _device_of(create: Create) -> DeviceId:
    selector = create.body["spec"]["deviceSelector"]
    return DeviceId(selector["driver"], selector["pool"], selector["device"])


def _pass(
    cluster: Cluster, tracks: dict[DeviceId, Track], now: datetime, shuffle: Random | None = None
) -> Decision:
    outcome = Selection(devices=cluster.world.scope)
    return decide(cluster.policy(), outcome, cluster.view(shuffle), tracks, now, RULES_API)


def _since(tracks: dict[DeviceId, Track], dev: DeviceId) -> tuple[datetime, DeviceId]:
    since = tracks[dev].since
    assert since is not None, f"{dev} is listed but not signalled"
    return since, dev


def _ripe(cluster: Cluster, tracks: dict[DeviceId, Track], dev: DeviceId, now: datetime) -> bool:
    since = tracks[dev].since if dev in tracks else None
    return since is not None and now >= held_from(since) + timedelta(seconds=cluster.world.after)


@examples(300)
@given(worlds())
def test_every_pass_keeps_the_guard_and_the_signal_rules(world: World) -> None:
    cluster = Cluster(world)
    tracks: dict[DeviceId, Track] = {}
    now = at(0)
    limit_total = world.limit.of(len(world.scope))
    pool_sizes = {pool: sum(1 for d in world.scope if d.pool == pool) for pool in world.pools}
    for step in world.steps:
        now += timedelta(seconds=step.seconds)
        cluster.flip(step.toggled, now)
        before = cluster.tainted()
        decision = _pass(cluster, tracks, now)
        tracks = dict(decision.tracks)
        planned = writes(decision.plan)
        created = [_device_of(w) for w in planned if isinstance(w, Create)]
        deleted = {w.path.rsplit("/", 1)[1] for w in planned if isinstance(w, Delete)}

        if world.effect == "None":
            assert not [w for w in planned if isinstance(w, Create | Patch)], "the dry run writes no rule"
        for dev in created:
            assert dev in world.scope, f"{dev} is outside the scope"
            assert dev in cluster.unhealthy_since, f"{dev} has no signal"
            assert _ripe(cluster, tracks, dev, now), f"{dev} is tainted before after"
            assert dev not in before, f"{dev} already has its rule"
            assert dev not in world.taken, f"{dev}'s rule name is another owner's"
        for name in deleted:
            cleared = cluster.rules[name].device
            assert cleared is not None
            assert cleared not in cluster.unhealthy_since, "a rule is deleted while signalled"
            quiet = tracks[cleared].quiet_since
            assert world.clear_after is not None, "clearAfter Never keeps every rule"
            assert quiet is not None
            assert now >= quiet + timedelta(seconds=world.clear_after), "cleared early"

        cluster.carry_out(decision.plan)
        after = cluster.tainted()
        if created:
            assert len(after) <= limit_total, (sorted(after), limit_total)
            if world.limit.percent:
                for pool in {dev.pool for dev in created}:
                    in_pool = sum(1 for dev in after if dev.pool == pool)
                    assert in_pool <= world.limit.of(pool_sizes[pool]), (pool, in_pool)

        states = {
            DeviceId(e["driver"], e["pool"], e["device"]): e["state"]
            for e in cluster.status.get("devices") or ()
        }
        assert len(states) == len(cluster.status.get("devices") or ()), "a device is listed once"
        if not world.limit.percent:
            # The longest signalled go first (then by device), whatever order the events came in.
            chosen = created or [d for d, state in states.items() if state == "WouldTaint"]
            waited = [d for d, state in states.items() if state == "HeldBack"]
            if chosen and waited:
                assert max(_since(tracks, d) for d in chosen) <= min(_since(tracks, d) for d in waited)

        # A dry run's would-be rules take places as real ones would.
        taking = after | {dev for dev, state in states.items() if state == "WouldTaint"}
        for dev, state in states.items():
            if state == "HeldBack":
                in_pool = sum(1 for d in taking if d.pool == dev.pool)
                pool_full = world.limit.percent and in_pool >= world.limit.of(pool_sizes[dev.pool])
                assert len(taking) >= limit_total or pool_full, f"{dev} held back with a free place"
        for dev, holder in world.taken.items():
            if dev in world.scope and dev in cluster.unhealthy_since and _ripe(cluster, tracks, dev, now):
                assert holder != POLICY_UID
                assert states.get(dev) == "Conflict", (dev, states.get(dev))

        waiting = [
            held_from(tracks[dev].since) + timedelta(seconds=world.after)  # type: ignore[arg-type]
            for dev in world.scope
            if dev not in before
            and dev in tracks
            and tracks[dev].since is not None
            and not _ripe(cluster, tracks, dev, now)
        ]
        if waiting:
            result = decision.plan.result
            assert isinstance(result, Requeue), result
            assert result.after <= max((min(waiting) - now).total_seconds(), MINIMUM_REQUEUE)


@examples(75)
@given(worlds(), st.integers(0, 2**32 - 1))
def test_the_plan_does_not_depend_on_listing_order(world: World, seed: int) -> None:
    random = Random(seed)
    cluster = Cluster(world)
    tracks: dict[DeviceId, Track] = {}
    now = at(0)
    for step in world.steps:
        now += timedelta(seconds=step.seconds)
        cluster.flip(step.toggled, now)
        decision = _pass(cluster, tracks, now)
        shuffled = _pass(cluster, tracks, now, shuffle=random)
        assert shuffled.plan == decision.plan
        assert shuffled.tracks == decision.tracks
        tracks = dict(decision.tracks)
        cluster.carry_out(decision.plan)
