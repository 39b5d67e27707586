"""The I/O layer of the taint-selector operator: watch events into the cache, decisions into API calls.

One work-queue key per selector, ``Key(SELECTOR, "", name)``. A pass (see the package docstring)
evaluates the selector in a worker thread (the CEL interpreter is thread-safe and 1000 devices take a
few hundred milliseconds, too long to hold the event loop), then hands the selection to
:func:`.decide.decide`, whose plan (the rule diff, then the status by server-side apply) the core's
executor carries out (:mod:`operators.core.plan`).

Watch callbacks are synchronous and never call the API; slice events are debounced so that a driver
republishing fifty slices costs one evaluation per selector, not fifty.

DeviceTaintRules are watched in the version discovery finds (``v1``, else ``v1beta2``, else
``v1alpha3``). kopf cannot add a watch after it started, so the watch is registered in
:meth:`prepare`, and a later change of the served version stops the process for a restart. Without
any version the selections are still evaluated and every selector reports
``Ready=False/DeviceTaintRuleUnavailable``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from operators.core.discovery import ServedResource
from operators.core.keys import Key
from operators.core.models import body_name
from operators.core.plan import RecordEvent, Together, Write, execute, operation
from operators.core.reconcile import Done, Result
from operators.core.workqueue import route
from operators.dra import taintrules
from operators.dra.api import GROUP
from operators.dra.scopes import ScopeController, Update, report_rules_api
from operators.dra.selection import Invalid, Selection

from . import metrics
from .cache import ClusterCache
from .decide import decide
from .models import KIND, DeviceClass, ResourceSlice, TaintSelector
from .selection import evaluate
from .status import REASON_DEVICE_TAINT_RULE_UNAVAILABLE

if TYPE_CHECKING:
    from operators.core.runtime import Runtime

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 4
SELECTOR = "selector"
"""The kind of the work-queue keys: DeviceTaintSelectors, cluster-scoped."""


class TaintSelectorController(ScopeController[ClusterCache]):
    def __init__(self, runtime: Runtime) -> None:
        super().__init__(ClusterCache())
        self.runtime = runtime
        self.rules_api: ServedResource | None = None
        self.selected: dict[str, int] = {}
        self._prepared = False
        metrics.state.observe(self)

    # --- Start -----------------------------------------------------------------------------------------

    async def prepare(self) -> bool:
        # Selectors, slices and classes are required watches: the runtime calls this only once
        # they are served.
        if not self._prepared:
            self._prepared = True
            # The version the runtime watches (the rule watch names taintrules.VERSIONS); a change
            # of it restarts the process, so the rules are written as the version read.
            self.rules_api = self.runtime.served_resource(GROUP, taintrules.PLURAL)
            report_rules_api(
                log,
                self.rules_api,
                "selectors are evaluated but taint nothing "
                f"(condition Ready=False, {REASON_DEVICE_TAINT_RULE_UNAVAILABLE})",
            )
        return True

    # --- Watch callbacks (synchronous; no API calls); slices, classes, rules and claims: the base's ---

    def upsert_selector(self, body: Mapping[str, Any]) -> None:
        self.upsert(self.cache.upsert_owner, self.delete_selector, body, 0.0)

    def delete_selector(self, body: Mapping[str, Any]) -> None:
        self.route(self.cache.delete_owner, body, 0.0)
        # The tombstone of a selector's predecessor leaves the selector, and its gauge, in place.
        name = body_name(body)
        if name not in self.cache.selectors:
            self.selected.pop(name, None)

    def route(self, update: Update, body: Mapping[str, Any], delay: float) -> bool:
        return route(self.runtime.queue, SELECTOR, update, body, delay, log)

    # --- Reconcile -------------------------------------------------------------------------------------

    async def sync(self, key: Key) -> Result:
        if key.kind != SELECTOR:
            raise ValueError(f"not a taintselector work key: {key!r}")
        name = key.name
        selector = self.cache.selectors.get(name)
        if selector is None or selector.metadata.deletion_timestamp is not None:
            return Done("deleted: its rules go with it (owner references)")
        outcome = await self._evaluate(selector)
        if isinstance(outcome, Selection):
            self.selected[name] = len(outcome.devices)
        plan = decide(selector, outcome, self.cache, self.rules_api)
        subject = {"object": f"{KIND} {name}"}
        if isinstance(outcome, Invalid) and any(isinstance(step, RecordEvent) for step in plan.steps):
            log.warning("invalid: %s", outcome.message, extra=subject)
        result = await execute(plan, self.runtime, written=_count_rule_write)
        rule_writes = Counter(
            operation(write) for step in plan.steps if isinstance(step, Together) for write in step.writes
        )
        if rule_writes:
            log.info(
                "rules written: %d created, %d updated, %d deleted",
                rule_writes["create"],
                rule_writes["update"],
                rule_writes["delete"],
                extra=subject,
            )
        return result

    async def _evaluate(self, selector: TaintSelector) -> Selection | Invalid:
        def timed(slices: list[ResourceSlice], classes: dict[str, DeviceClass]) -> Selection | Invalid:
            started = time.monotonic()
            outcome = evaluate(selector.spec, slices, classes)
            metrics.evaluation_duration.observe(time.monotonic() - started)
            return outcome

        outcome = await self.select(timed)
        metrics.evaluations.labels(result="invalid" if isinstance(outcome, Invalid) else "valid").inc()
        return outcome


def _count_rule_write(write: Write) -> None:
    # Only the rule writes are counted: the status is applied, which is no operation of theirs.
    verb = operation(write)
    if verb is not None:
        metrics.rule_writes.labels(operation=verb).inc()
