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

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from operators.core.discovery import ServedResource
from operators.core.keys import Key
from operators.core.plan import Create, Delete, Patch, RecordEvent, Together, Write, execute
from operators.core.reconcile import Done, Result
from operators.core.workqueue import route
from operators.dra import taintrules
from operators.dra.api import GROUP
from operators.dra.selection import Invalid, Selection
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from . import metrics
from .cache import ClusterCache
from .decide import decide
from .models import KIND, TaintSelector
from .selection import evaluate
from .status import REASON_DEVICE_TAINT_RULE_UNAVAILABLE

if TYPE_CHECKING:
    from operators.core.runtime import Runtime

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 4
SLICE_DEBOUNCE_SECONDS = 0.2
RULE_DEBOUNCE_SECONDS = 0.5
# Claims change with every pod that comes and goes; a dry run need not follow each one at once.
CLAIM_DEBOUNCE_SECONDS = 1.0
SELECTOR = "selector"
"""The kind of the work-queue keys: DeviceTaintSelectors, cluster-scoped."""


class TaintSelectorController:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.cache = ClusterCache()
        self.rules_api: ServedResource | None = None
        self.selected: dict[str, int] = {}
        self._prepared = False
        # One evaluation at a time. They are CPU-bound Python in threads, so the GIL already runs
        # them one after another; side by side, each still held its own working set, and over
        # 128 000 devices three selectors at once took the process past its memory limit.
        self._evaluating = asyncio.Lock()
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
            if self.rules_api is None:
                log.warning(
                    "%s; selectors are evaluated but taint nothing (condition Ready=False, %s)",
                    DEVICE_TAINT_RULES_UNSERVED,
                    REASON_DEVICE_TAINT_RULE_UNAVAILABLE,
                )
            else:
                log.info("writing DeviceTaintRules as %s", self.rules_api.api_version)
        return True

    # --- Watch callbacks (synchronous; no API calls) ---------------------------------------------------

    def upsert_selector(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_selector, body, 0.0)

    def delete_selector(self, body: Mapping[str, Any]) -> None:
        self.selected.pop(str((body.get("metadata") or {}).get("name")), None)
        self._route(self.cache.delete_selector, body, 0.0)

    def upsert_slice(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_slice, body, SLICE_DEBOUNCE_SECONDS)

    def delete_slice(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.delete_slice, body, SLICE_DEBOUNCE_SECONDS)

    def upsert_class(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_class, body, SLICE_DEBOUNCE_SECONDS)

    def delete_class(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.delete_class, body, SLICE_DEBOUNCE_SECONDS)

    def upsert_rule(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_rule, body, RULE_DEBOUNCE_SECONDS)

    def delete_rule(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.delete_rule, body, RULE_DEBOUNCE_SECONDS)

    def upsert_claim(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.upsert_claim, body, CLAIM_DEBOUNCE_SECONDS)

    def delete_claim(self, body: Mapping[str, Any]) -> None:
        self._route(self.cache.delete_claim, body, CLAIM_DEBOUNCE_SECONDS)

    def _route(
        self, update: Callable[[Mapping[str, Any]], list[str]], body: Mapping[str, Any], delay: float
    ) -> None:
        route(self.runtime.queue, SELECTOR, update, body, delay, log)

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
            _RULE_OPERATIONS[type(write)]
            for step in plan.steps
            if isinstance(step, Together)
            for write in step.writes
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
        async with self._evaluating:
            slices, classes = list(self.cache.slices.values()), dict(self.cache.classes)
            started = time.monotonic()
            outcome = await asyncio.to_thread(evaluate, selector.spec, slices, classes)
        metrics.evaluation_duration.observe(time.monotonic() - started)
        metrics.evaluations.labels(result="invalid" if isinstance(outcome, Invalid) else "valid").inc()
        return outcome


# Only the rule writes are counted; the status write is not a rule write.
_RULE_OPERATIONS: dict[type[Write], str] = {Create: "create", Patch: "update", Delete: "delete"}


def _count_rule_write(write: Write) -> None:
    operation = _RULE_OPERATIONS.get(type(write))
    if operation is not None:
        metrics.rule_writes.labels(operation=operation).inc()
