"""The devicetaint scenarios of spec §17 as two timelines, each shared by many scenarios.

``SliceMatrix``: scenarios 1-9, 11-14, 30 and 36 on one tainted ResourceSlice.

Every scenario gets its own device, claim and pod, so all of them share one taint time T (the
``timeAdded`` kube-apiserver gives the taints, written in one update) and one observation window:

- at T every device but two gets a NoExecute taint (those two get NoSchedule and None);
- at T+10 s the taint of scenario 11's device is removed, the newer slice of scenario 3's pool is
  deleted, and scenario 30's pod is replaced under its name;
- until T+36 s the pods are watched: an expected eviction must happen inside its window, measured by
  the deletion time kube-apiserver recorded (``deletionTimestamp`` minus the grace period), and a pod
  that must stay untouched is checked on every poll.

The same matrix runs on the upstream cluster for the differential test, with upstream's expectations
where the spec says we differ (scenario 6), and where that cluster's in-tree resourceclaim
controller, which adds missing reservations for bound pods, changes the setup (scenarios 12 and 30).

``RuleBoard``: the DeviceTaintRule scenarios (10, 15-29, 31, 37, 38) as rules running side by side.

Each scenario has its own driver (``s15.<test driver>``), so a rule selecting "every device of the driver"
touches that scenario only, and all rules are created at once at t0. Staged actions (changing an
effect, adding a pod, re-creating a rule) run when their precondition holds, and every poll records the
``EvictionInProgress`` condition of every rule, so the tests can judge both the final conditions and the
history (scenarios 15 and 28: never ``False`` while a pod still waits; writes at least 10 s apart).

The same board runs on the upstream cluster for the differential test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from devcluster.kube import wait_for
from e2e.devicetaint.world import (
    KEY,
    RESOURCE,
    World,
    disruption_target,
    parse_time,
    random_uid,
    rfc3339,
    taint,
    tolerate,
)

POOL = "node-1"
GEN_POOL = "gen-pool"
SLICE_END = 36.0
NOW = (0, 5)
Window = tuple[int, int] | None


@dataclass(frozen=True)
class Case:
    scenario: str
    pod: str
    ours: Window
    """Seconds after T within which the pod is deleted; None: never."""
    upstream: Window

    def expected(self, upstream: bool) -> Window:
        return self.upstream if upstream else self.ours


def _case(scenario: str, pod: str, window: Window, *upstream: Window) -> Case:
    """``upstream``: upstream's window where the spec says it differs (section 16)."""
    return Case(scenario, pod, window, upstream[0] if upstream else window)


# Device per pod; the scenarios that need more set up more.
SIMPLE: list[tuple[Case, list[dict[str, Any]]]] = [
    (_case("1 slice taint", "p-s1", NOW), []),
    (_case("4 tolerationSeconds 20", "p-s4", (20, 25)), [tolerate(20)]),
    (_case("5 infinite toleration", "p-s5", None), [tolerate()]),
    (_case("6 empty effect, key", "p-s6-key", None, NOW), [tolerate(effect=None)]),
    (_case("6 empty effect and key", "p-s6-any", None, NOW), [{"operator": "Exists"}]),
    (_case("6 empty effect, 20 s", "p-s6-20", (20, 25), NOW), [tolerate(20, effect=None)]),
    (_case("7 effect NoSchedule", "p-s7-nosched", NOW), [tolerate(effect="NoSchedule")]),
    (_case("7 effect None", "p-s7-none", NOW), [tolerate(effect="None")]),
    (
        _case("8 value mismatch", "p-s8", NOW),
        [{"key": KEY, "operator": "Equal", "value": "Fine", "effect": "NoExecute"}],
    ),
    (_case("9 100 s and 30 s", "p-s9-min", (30, 35)), [tolerate(100), tolerate(30)]),
    (_case("9 30 s and forever", "p-s9-forever", None), [tolerate(30), tolerate()]),
    (_case("9 negative seconds", "p-s9-neg", NOW), [tolerate(-5)]),
    (_case("11 cancel", "p-s11", None), [tolerate(60)]),
]
NOT_AFFECTED = [
    _case("12 unscheduled pod", "p-s12-unbound", None),
    # Upstream's cluster runs the in-tree resourceclaim controller, which reserves an allocated claim for
    # a bound pod that references it: there the pod becomes a consumer and is evicted.
    _case("12 not reserved", "p-s12-unreserved", None, NOW),
    _case("12 unallocated claim", "p-s12-unallocated", None),
    _case("12 claim of another pod", "p-s12-foreign", None),
]
OTHERS = [
    _case("2 NoSchedule taint", "p-s2-nosched", None),
    _case("2 None taint", "p-s2-none", None),
    _case("3 newest generation only", "p-s3", (10, 15)),
    _case("13 two claims", "p-s13", NOW),
    # Spec §16 row 2 expects upstream to skip extended-resource claims; 1.37.2 evicts them like we do
    # (k8s.io/dynamic-resource-allocation resourceclaim.PodClaims yields them).
    _case("14 extended-resource claim", "p-s14", NOW),
    # The same controller reserves the claim for the replacement, which then tolerates for 20 s.
    _case("30 replaced pod", "p-s30", None, (20, 25)),
    _case("36 admin access", "p-s36", NOW),
]
CASES = [case for case, _ in SIMPLE] + NOT_AFFECTED + OTHERS


def deleted_at(pod: dict[str, Any]) -> datetime | None:
    """When the DELETE happened: kube-apiserver sets deletionTimestamp to that time plus the grace period."""
    meta = pod["metadata"]
    if not meta.get("deletionTimestamp"):
        return None
    return parse_time(meta["deletionTimestamp"]) - timedelta(
        seconds=meta.get("deletionGracePeriodSeconds", 0)
    )


class SliceMatrix:
    def __init__(self, world: World, driver: str, upstream: bool = False) -> None:
        self.world = world
        self.driver = driver
        self.upstream = upstream
        self.slice = f"{driver}-main"[:63]
        self.gen2_slice = f"{driver}-gen2"[:63]
        self.taint_time: datetime | None = None
        self.uids: dict[str, str] = {}

    # --- Setup -----------------------------------------------------------------------------------------

    def setup(self) -> None:
        w, d = self.world, self.driver
        devices = [f"d-{case.pod}" for case in CASES if case.pod not in ("p-s3", "p-s13")]
        devices += ["d-p-s13-a", "d-p-s13-b"]
        w.resource_slice(self.slice, d, POOL, devices)
        # Scenario 3: generation 2 hides generation 1's taint until it is deleted. Generation 2 is
        # created first. Slices reach a controller in the order they were written, but on another
        # watch than pods and claims: with generation 1 first, it can see the tainted generation, the
        # claim and the pod before generation 2, a combination that never existed, and evict the pod
        # at once (seen once in CI, in our operator).
        w.resource_slice(self.gen2_slice, d, GEN_POOL, ["g-0"], generation=2)
        w.resource_slice(f"{d}-gen1"[:63], d, GEN_POOL, ["g-0"], {"g-0": [taint()]}, generation=1)
        self._remember(w.allocated_pod("p-s3", d, GEN_POOL, ["g-0"]))
        for case, tolerations in SIMPLE:
            self._remember(w.allocated_pod(case.pod, d, POOL, [f"d-{case.pod}"], tolerations))
        for name in ("p-s2-nosched", "p-s2-none", "p-s30"):
            tolerations = [tolerate(20)] if name == "p-s30" else []
            self._remember(w.allocated_pod(name, d, POOL, [f"d-{name}"], tolerations))
        self._remember(w.allocated_pod("p-s36", d, POOL, ["d-p-s36"], admin_access=True))
        self._setup_not_affected()
        self._setup_two_claims()
        self._setup_extended()

    def _setup_not_affected(self) -> None:
        w, d = self.world, self.driver
        unbound = w.pod("p-s12-unbound", ["p-s12-unbound-c"], bound=False)
        w.claim("p-s12-unbound-c", d, POOL, ["d-p-s12-unbound"], [unbound])
        unreserved = w.pod("p-s12-unreserved", ["p-s12-unreserved-c"])
        other = {"name": "p-s12-unreserved", "uid": random_uid()}
        w.claim("p-s12-unreserved-c", d, POOL, ["d-p-s12-unreserved"], [other])
        unallocated = w.pod("p-s12-unallocated", ["p-s12-unallocated-c"])
        w.claim("p-s12-unallocated-c", d, POOL, ["d-p-s12-unallocated"], allocate=False)
        owner = w.pod("p-s12-owner", bound=False)
        foreign = w.pod("p-s12-foreign", template_entry="e2e-template")
        w.api.patch(
            f"/api/v1/namespaces/{w.namespace}/pods/p-s12-foreign/status",
            {"status": {"resourceClaimStatuses": [{"name": "tmpl", "resourceClaimName": "p-s12-foreign-c"}]}},
        )
        w.claim("p-s12-foreign-c", d, POOL, ["d-p-s12-foreign"], [foreign], owner=owner)
        for pod in (unbound, unreserved, unallocated, foreign):
            self._remember(pod)

    def _setup_two_claims(self) -> None:
        w, d = self.world, self.driver
        pod = w.pod("p-s13", ["p-s13-a", "p-s13-b"])
        w.claim("p-s13-a", d, POOL, ["d-p-s13-a"], [pod], [tolerate(100)])
        w.claim("p-s13-b", d, POOL, ["d-p-s13-b"], [pod])
        self._remember(pod)

    def _setup_extended(self) -> None:
        w, d = self.world, self.driver
        pod = w.pod("p-s14", extended_resource="example.com/gpu")
        w.api.patch(
            f"/api/v1/namespaces/{w.namespace}/pods/p-s14/status",
            {
                "status": {
                    "extendedResourceClaimStatus": {
                        "resourceClaimName": "p-s14-c",
                        "requestMappings": [
                            {
                                "containerName": "main",
                                "resourceName": "example.com/gpu",
                                "requestName": "req-0",
                            }
                        ],
                    }
                }
            },
        )
        w.claim("p-s14-c", d, POOL, ["d-p-s14"], [pod], owner=pod)
        self._remember(pod)

    def _remember(self, pod: dict[str, Any]) -> None:
        self.uids[pod["metadata"]["name"]] = pod["metadata"]["uid"]

    # --- Timeline --------------------------------------------------------------------------------------

    def apply_taints(self) -> datetime:
        """Taint every device in one update; returns T, the timeAdded kube-apiserver gave the taints."""
        effects = {"d-p-s2-nosched": "NoSchedule", "d-p-s2-none": "None"}
        devices = [f"d-{c.pod}" for c in CASES if c.pod not in ("p-s3", "p-s13")] + ["d-p-s13-a", "d-p-s13-b"]
        updated = self.world.set_slice_taints(
            self.slice, {d: [taint(effects.get(d, "NoExecute"))] for d in devices}
        )
        times = {t["timeAdded"] for dev in updated["spec"]["devices"] for t in dev.get("taints", [])}
        assert len(times) == 1, times
        self.taint_time = parse_time(times.pop())
        return self.taint_time

    def at_ten_seconds(self) -> None:
        w = self.world
        w.set_slice_taints(self.slice, {"d-p-s11": []})
        w.api.delete(f"/apis/resource.k8s.io/v1/resourceslices/{self.gen2_slice}")
        old_uid = self.uids["p-s30"]
        w.api.delete(f"/api/v1/namespaces/{w.namespace}/pods/p-s30", uid=old_uid, gracePeriodSeconds="0")
        # Same name, new UID, not reserved: the old eviction must not hit it.
        replacement = wait_for(lambda: w.pod("p-s30", ["p-s30-c"]), 30, "p-s30 to be re-created")
        self.uids["p-s30-replaced"] = replacement["metadata"]["uid"]

    def run(self, on_poll: Callable[[], None] = lambda: None) -> dict[str, dict[str, Any] | None]:
        """Taint, act at T+10 s, and watch until T+36 s; returns the pods as they end up."""
        start = self.apply_taints()
        acted = False
        never = [c.pod for c in CASES if c.expected(self.upstream) is None and c.pod != "p-s30"]

        def window_over() -> bool:
            nonlocal acted
            if not acted and _since(start) >= 10:
                self.at_ten_seconds()
                acted = True
            pods = {p["metadata"]["name"]: p for p in self.world.api.list(self._pods_path())}
            for name in never:
                pod = pods.get(name)
                assert pod is None or deleted_at(pod) is None, f"{name} was evicted"
            on_poll()
            return _since(start) >= SLICE_END

        wait_for(window_over, SLICE_END + 60, "the end of the observation window", interval=0.5)
        pods = {p["metadata"]["name"]: p for p in self.world.api.list(self._pods_path())}
        return {case.pod: pods.get(case.pod) for case in CASES}

    def _pods_path(self) -> str:
        return f"/api/v1/namespaces/{self.world.namespace}/pods"

    # --- Verdict ---------------------------------------------------------------------------------------

    def evictions(self, pods: dict[str, dict[str, Any] | None]) -> dict[str, float | None]:
        """Seconds from T to each pod's deletion (None: not deleted by the controller)."""
        assert self.taint_time is not None
        result: dict[str, float | None] = {}
        for case in CASES:
            pod = pods[case.pod]
            when = deleted_at(pod) if pod is not None else None
            if case.pod == "p-s30":
                # The original was deleted by the test; the replacement must be untouched.
                assert pod is not None
                assert pod["metadata"]["uid"] == self.uids["p-s30-replaced"]
            result[case.pod] = (when - self.taint_time).total_seconds() if when is not None else None
        return result

    def mismatches(self, pods: dict[str, dict[str, Any] | None]) -> list[str]:
        problems = []
        for case in CASES:
            seconds = self.evictions(pods)[case.pod]
            window = case.expected(self.upstream)
            if window is None and seconds is not None:
                problems.append(f"scenario {case.scenario}: {case.pod} evicted at T+{seconds:.0f}s")
            elif window is not None and (seconds is None or not window[0] <= seconds <= window[1]):
                problems.append(
                    f"scenario {case.scenario}: {case.pod} evicted at T+{seconds}s, not in {window}"
                )
            pod = pods[case.pod]
            if pod is not None and seconds is not None and disruption_target(pod) is None:
                problems.append(f"scenario {case.scenario}: {case.pod} has no DisruptionTarget condition")
            if pod is not None and seconds is None and disruption_target(pod) is not None:
                problems.append(f"scenario {case.scenario}: {case.pod} has a DisruptionTarget condition")
        return problems


def _since(start: datetime) -> float:
    return time.time() - start.timestamp()


DEVICES = ("gpu-0", "gpu-1", "gpu-2")
RULES_END = 34.0

TAIL = (
    "if the effect was NoExecute. This information will not be updated again. "
    "Recreate the DeviceTaintRule to trigger an update."
)
ONE_EVICTED = "1 pod evicted since starting the controller."


def dry_run(published: int, allocated: int, pods: str) -> str:
    devices = "1 published device" if published == 1 else f"{published} published devices"
    allocs = "1 allocated device" if allocated == 1 else f"{allocated} allocated devices"
    return f"{devices} selected. {allocs} selected. {pods} {TAIL}"


NO_PODS = "0 pods would be evicted in 0 different namespaces"
ONE_POD = "1 pod would be evicted in 1 namespace"


@dataclass(frozen=True)
class Expected:
    status: str
    reason: str
    message: str
    generation: int = 1


EXPECTED: dict[str, Expected] = {
    "r10": Expected("False", "Completed", ONE_EVICTED),
    "r15": Expected("False", "NotStarted", ""),  # after scenario 29 re-created it
    "r16": Expected(
        "True",
        "PodsPendingEviction",
        "2 pods need to be evicted in 2 different namespaces. 1 pod evicted since starting the controller.",
    ),
    "r17": Expected("True", "PodsPendingEviction", "1 pod needs to be evicted in 1 namespace."),
    "r18": Expected("False", "NotStarted", ""),
    "r19": Expected("False", "Completed", ONE_EVICTED, 2),
    "r20": Expected("False", "NoEffect", dry_run(0, 0, NO_PODS)),
    "r21-forever": Expected("False", "NoEffect", dry_run(3, 1, NO_PODS)),
    "r21-empty": Expected("False", "NoEffect", dry_run(3, 1, NO_PODS)),
    "r21-600": Expected("False", "NoEffect", dry_run(3, 1, ONE_POD)),
    "r22": Expected("False", "NoEffect", dry_run(3, 1, ONE_POD)),
    "r24": Expected(
        "False",
        "OtherEffect",
        "Eviction only happens for the NoExecute effect. 2 pods evicted since starting the controller.",
        2,
    ),
    "r25": Expected("False", "NoEffect", f"{dry_run(3, 1, NO_PODS)} {ONE_EVICTED}", 2),
    "r26-none": Expected("False", "NotStarted", ""),
    "r26-other": Expected("False", "NotStarted", ""),
    "r26-pool": Expected("False", "Completed", ONE_EVICTED),
    "r27": Expected("False", "Completed", ONE_EVICTED),
    "r28": Expected("False", "Completed", "3 pods evicted since starting the controller."),
    "r31": Expected("False", "Completed", ONE_EVICTED),
    "r37": Expected("False", "NoEffect", dry_run(3, 2, "2 pods would be evicted in 1 namespace")),
    "r38-a": Expected("False", "Completed", ONE_EVICTED),
    "r38-b": Expected("False", "Completed", ONE_EVICTED),
}
# Section 16, row 1: upstream ignores an empty-effect toleration, also in the dry run.
UPSTREAM_DIFFERS = {"r21-empty": Expected("False", "NoEffect", dry_run(3, 1, ONE_POD))}
# Pods that rules must evict, and pods no rule may touch.
EVICTED = (
    "p10",
    "p15",
    "p16-a",
    "p19",
    "p24-a",
    "p24-b",
    "p25",
    "p26",
    "p27",
    "p28-0",
    "p28-4",
    "p28-8",
    "p38",
)
UNTOUCHED = (
    "p16-b",
    "p17",
    "p21-forever",
    "p21-empty",
    "p21-600",
    "p22",
    "p22-late",
    "p24-c",
    "p37-a",
    "p37-b",
)


@dataclass
class Record:
    """The condition of one rule as it was seen at one poll."""

    at: float
    status: str
    reason: str
    message: str
    generation: int | None
    transition: str


@dataclass
class RuleBoard:
    world: World
    base_driver: str
    second_namespace: str
    suffix: str
    upstream: bool = False
    t0: float = 0.0
    history: dict[str, list[Record]] = field(default_factory=dict)
    evicted_seen: dict[str, float] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    uids: dict[str, str] = field(default_factory=dict)
    created: dict[str, str] = field(default_factory=dict)
    """creationTimestamp of each rule."""
    acted_at: dict[str, float] = field(default_factory=dict)
    """Seconds after t0 at which each staged action ran."""

    def name(self, key: str) -> str:
        return f"{key}-{self.suffix}"

    def driver(self, scenario: str) -> str:
        return f"{scenario}.{self.base_driver}"

    def expected(self, key: str) -> Expected:
        return UPSTREAM_DIFFERS.get(key, EXPECTED[key]) if self.upstream else EXPECTED[key]

    # --- Setup -----------------------------------------------------------------------------------------

    def _fixture(self, scenario: str, published: bool = True, pool: str = POOL) -> str:
        driver = self.driver(scenario)
        if published:
            self.world.resource_slice(f"{driver}-slice"[:63], driver, pool, DEVICES)
        return driver

    def _pod(
        self,
        name: str,
        scenario: str,
        device: str = "gpu-0",
        tolerations: list[dict[str, Any]] | None = None,
        **kw: Any,
    ) -> None:
        pod = self.world.allocated_pod(
            name, self.driver(scenario), kw.pop("pool", POOL), [device], tolerations or [], **kw
        )
        self.uids[name] = pod["metadata"]["uid"]

    def setup(self) -> None:
        for scenario in (
            "s15",
            "s16",
            "s17",
            "s19",
            "s21-forever",
            "s21-empty",
            "s21-600",
            "s22",
            "s24",
            "s25",
        ):
            self._fixture(scenario)
        for scenario in ("s28", "s31", "s37", "s38"):
            self._fixture(scenario)
        self._fixture("s26", pool=self.name("s26-pool"))
        self._fixture("s27", published=False)
        self._pod("p10", "s10", tolerations=[tolerate(60)])
        self._pod("p15", "s15")
        self._pod("p16-a", "s16")
        self._pod("p16-b", "s16", "gpu-1", [tolerate(600)])
        self._pod("p16-c", "s16", "gpu-2", [tolerate(600)], namespace=self.second_namespace)
        self._pod("p17", "s17", tolerations=[tolerate(600)])
        self._pod("p19", "s19")
        self._pod("p21-forever", "s21-forever", tolerations=[tolerate()])
        self._pod("p21-empty", "s21-empty", tolerations=[tolerate(effect=None)])
        self._pod("p21-600", "s21-600", tolerations=[tolerate(600)])
        self._pod("p22", "s22")
        self._pod("p24-a", "s24")
        self._pod("p24-b", "s24", "gpu-1")
        self._pod("p24-c", "s24", "gpu-2", [tolerate(600)])
        self._pod("p25", "s25")
        self._pod("p26", "s26", pool=self.name("s26-pool"))
        self._pod("p27", "s27")
        for seconds in (0, 4, 8):
            self._pod(f"p28-{seconds}", "s28", DEVICES[seconds // 4], [tolerate(seconds)])
        self._pod("p31", "s31")
        self._pod("p37-a", "s37")
        self._pod("p37-b", "s37")
        # Scenario 38: p38's claim is allocated once both rules are known (see _act), or the first rule
        # could evict it before the second exists.
        p38 = self.world.pod("p38", ["p38-c"])
        self.uids["p38"] = p38["metadata"]["uid"]
        self.world.claim("p38-c", self.driver("s38"), POOL, ["gpu-0"], allocate=False)
        # Scenario 31: the user deleted p31 first; bound and without kubelet, it lingers terminating.
        self.world.api.delete(f"/api/v1/namespaces/{self.world.namespace}/pods/p31")
        self.world.wait_terminating("p31", 10)

    def create_rules(self) -> None:
        rule, d = self._rule, self.driver
        self.t0 = time.time()
        # Scenario 10: a taint dated an hour back is past any 60 s toleration already.
        an_hour_ago = rfc3339(datetime.now(UTC) - timedelta(hours=1))
        rule("r10", {"driver": d("s10")}, time_added=an_hour_ago)
        rule("r15", {"driver": d("s15")})
        rule("r16", {"driver": d("s16"), "pool": POOL})
        rule("r17", {"driver": d("s17")})
        rule("r18", {"device": "gpu-9"})
        rule("r19", {"driver": d("s19"), "pool": POOL}, "None")
        rule("r20", {"device": "nothing-here"}, "None")
        for variant in ("forever", "empty", "600"):
            rule(f"r21-{variant}", {"driver": d(f"s21-{variant}")}, "None")
        rule("r22", {"driver": d("s22")}, "None")
        rule("r24", {"driver": d("s24")})
        rule("r25", {"driver": d("s25")})
        # It matches nothing, but the session's eviction guard refuses it as one `{}` from everything.
        rule("r26-none", None, cluster_wide=True)
        rule("r26-other", {"driver": "other.example.com"})
        rule("r26-pool", {"pool": self.name("s26-pool")})
        rule("r27", {"driver": d("s27"), "pool": POOL, "device": "gpu-0"})
        rule("r28", {"driver": d("s28")})
        rule("r31", {"driver": d("s31")})
        rule("r37", {"driver": d("s37")}, "None")
        rule("r38-a", {"driver": d("s38"), "device": "gpu-0"})
        rule("r38-b", {"driver": d("s38"), "device": "gpu-0"})

    def _rule(
        self,
        key: str,
        selector: dict[str, Any] | None,
        effect: str = "NoExecute",
        time_added: str | None = None,
        cluster_wide: bool = False,
    ) -> None:
        created = self.world.rule(self.name(key), selector, effect, time_added, cluster_wide)
        self.created[key] = created["metadata"]["creationTimestamp"]

    # --- Timeline --------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.time() - self.t0

    def run(
        self, on_start: Callable[[], None] = lambda: None, on_poll: Callable[[], None] = lambda: None
    ) -> None:
        self.create_rules()
        on_start()

        def finished() -> bool:
            self.poll()
            on_poll()
            return self.elapsed() >= RULES_END

        wait_for(finished, RULES_END + 60, "the end of the rules timeline", interval=0.5)

    def poll(self) -> None:
        now = self.elapsed()
        rules = {r["metadata"]["name"]: r for r in self.world.api.list(f"{RESOURCE}/devicetaintrules")}
        pods = {
            p["metadata"]["name"]: p
            for ns in (self.world.namespace, self.second_namespace)
            for p in self.world.api.list(f"/api/v1/namespaces/{ns}/pods")
        }
        for name, pod in pods.items():
            if pod["metadata"].get("deletionTimestamp") and name not in self.evicted_seen:
                self.evicted_seen[name] = now
        for key in EXPECTED:
            rule = rules.get(self.name(key))
            condition = _condition(rule)
            if condition is None:
                continue
            record = Record(
                now,
                condition["status"],
                condition["reason"],
                condition.get("message", ""),
                condition.get("observedGeneration"),
                condition["lastTransitionTime"],
            )
            history = self.history.setdefault(key, [])
            if not history or (history[-1].transition, history[-1].message) != (
                record.transition,
                record.message,
            ):
                history.append(record)
        self._check_never_false_early(rules, pods)
        self._act(rules, pods)

    def _check_never_false_early(self, rules: dict[str, Any], pods: dict[str, Any]) -> None:
        """Scenarios 15 and 28: ``False`` only once no selected pod waits for its eviction."""
        for key, names in (("r15", ["p15"]), ("r28", ["p28-0", "p28-4", "p28-8"])):
            if key == "r15" and "recreate-r15" in self.done:
                continue
            condition = _condition(rules.get(self.name(key)))
            if condition is None or condition["status"] != "False":
                continue
            waiting = [n for n in names if n in pods and not pods[n]["metadata"].get("deletionTimestamp")]
            # Pods were read after the rule: a pod deleted since cannot have lost its deletionTimestamp.
            if waiting:
                self.violations.append(f"{key} read False at t0+{self.elapsed():.1f}s while {waiting} waited")

    def _act(self, rules: dict[str, Any], pods: dict[str, Any]) -> None:
        def once(action: str, ready: bool, do: Callable[[], None]) -> None:
            if action not in self.done and ready:
                self.done.add(action)
                self.acted_at[action] = self.elapsed()
                do()

        def terminating(*names: str) -> bool:
            return all(n in pods and pods[n]["metadata"].get("deletionTimestamp") for n in names)

        now = self.elapsed()
        cond = {key: _condition(rules.get(self.name(key))) for key in ("r15", "r22", "r38-a", "r38-b")}
        once("allocate-p38", cond["r38-a"] is not None and cond["r38-b"] is not None, self._allocate_p38)
        # Scenario 22: a second consumer after the dry run was reported must not change the report.
        once("add-p22-late", cond["r22"] is not None, self._add_late_pod)
        # Scenario 23 (after 19 held for 6 s): None -> NoExecute.
        once("r19-noexecute", now >= 6, lambda: self._set_effect("r19", "NoExecute"))
        # Scenario 24: NoExecute -> NoSchedule once two pods went and one waits.
        once("r24-noschedule", terminating("p24-a", "p24-b"), lambda: self._set_effect("r24", "NoSchedule"))
        # Scenario 25: NoExecute -> None after the eviction.
        once("r25-none", terminating("p25"), lambda: self._set_effect("r25", "None"))
        # Scenario 29: re-create scenario 15's rule once it completed.
        r15 = cond["r15"]
        once("recreate-r15", r15 is not None and r15["reason"] == "Completed", self._recreate_r15)

    def _allocate_p38(self) -> None:
        pod = {"name": "p38", "uid": self.uids["p38"]}
        self.world.allocate("p38-c", self.driver("s38"), POOL, ["gpu-0"], [pod])

    def _add_late_pod(self) -> None:
        self._pod("p22-late", "s22", "gpu-1")

    def _set_effect(self, key: str, effect: str) -> None:
        path = f"{RESOURCE}/devicetaintrules/{self.name(key)}"
        self.world.api.patch(path, {"spec": {"taint": {"effect": effect}}})

    def _recreate_r15(self) -> None:
        path = f"{RESOURCE}/devicetaintrules/{self.name('r15')}"
        self.world.api.delete(path)
        wait_for(lambda: self.world.api.get_or_none(path) is None, 10, "r15 to go")
        self.world.api.create(
            f"{RESOURCE}/devicetaintrules",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceTaintRule",
                "metadata": {"name": self.name("r15")},
                "spec": {
                    "deviceSelector": {"driver": self.driver("s15")},
                    "taint": {"key": "dra.example.com/unhealthy", "value": "Broken", "effect": "NoExecute"},
                },
            },
        )

    # --- Verdict ---------------------------------------------------------------------------------------

    def final(self, key: str) -> Record:
        return self.history[key][-1]

    def mismatches(self) -> list[str]:
        problems = list(self.violations)
        for key in EXPECTED:
            want = self.expected(key)
            if key not in self.history:
                problems.append(f"{key}: no condition")
                continue
            got = self.final(key)
            if (got.status, got.reason, got.message, got.generation) != (
                want.status,
                want.reason,
                want.message,
                want.generation,
            ):
                problems.append(
                    f"{key}: {got.status}/{got.reason}/{got.message!r}/gen {got.generation}, want {want}"
                )
        for name in EVICTED:
            if name not in self.evicted_seen:
                problems.append(f"{name} was not evicted")
        for name in UNTOUCHED:
            if name in self.evicted_seen:
                problems.append(f"{name} was evicted")
        return problems

    def transitions(self, key: str) -> list[float]:
        """The distinct lastTransitionTime values of a rule, in seconds since the epoch."""
        seen: list[float] = []
        for record in self.history.get(key, []):
            moment = parse_time(record.transition).timestamp()
            if not seen or seen[-1] != moment:
                seen.append(moment)
        return seen


def _condition(rule: dict[str, Any] | None) -> dict[str, Any] | None:
    if rule is None:
        return None
    for condition in rule.get("status", {}).get("conditions", []):
        if condition["type"] == "EvictionInProgress":
            result: dict[str, Any] = condition
            return result
    return None
