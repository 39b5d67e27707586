"""The I/O layer of the taint-selector operator: watch events into the cache, decisions into API calls.

One work-queue key per selector, ``Key(SELECTOR, "", name)``. A pass (see the package docstring)
evaluates the selector in a worker thread (the CEL interpreter is thread-safe and 1000 devices take a
few hundred milliseconds, too long to hold the event loop), writes the rule diff, then the status by
server-side apply.

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
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from operators.core.client import ApiError
from operators.core.conditions import TRUE, find
from operators.core.discovery import ServedResource
from operators.core.events import WARNING, ObjectRef
from operators.core.keys import Key
from operators.core.models import UnparsableObject, log_skipped
from operators.core.reconcile import Done, Result
from operators.dra import taintrules
from operators.dra.api import GROUP
from operators.dra.taints import EFFECT_NONE
from operators.dra.unserved import DEVICE_TAINT_RULES_UNSERVED

from . import metrics
from .cache import ClusterCache
from .dryrun import DryRun, dry_run
from .models import API_VERSION, KIND, SELECTORS, TaintSelector
from .rules import RuleDiff, desired_rules, diff_rules
from .selection import Invalid, Selection, evaluate
from .status import INVALID, REASON_DEVICE_TAINT_RULE_UNAVAILABLE, needs_write, selector_status

if TYPE_CHECKING:
    from operators.core.runtime import Runtime

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 4
SLICE_DEBOUNCE_SECONDS = 0.2
RULE_DEBOUNCE_SECONDS = 0.5
# Claims change with every pod that comes and goes; a dry run need not follow each one at once.
CLAIM_DEBOUNCE_SECONDS = 1.0
WRITE_CONCURRENCY = 32
EVENT_INVALID = "InvalidSelector"
SELECTOR = "selector"
"""The kind of the work-queue keys: DeviceTaintSelectors, cluster-scoped."""


def _selector_ref(selector: TaintSelector) -> ObjectRef:
    return ObjectRef(API_VERSION, KIND, selector.metadata.name, None, selector.metadata.uid)


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
        try:
            names = update(body)
        except UnparsableObject as err:
            log_skipped(log, err)
            return
        for name in names:
            self.runtime.queue.add_after(Key(SELECTOR, "", name), delay)

    # --- Reconcile -------------------------------------------------------------------------------------

    async def sync(self, key: Key) -> Result:
        if key.kind != SELECTOR:
            raise ValueError(f"not a taintselector work key: {key!r}")
        name = key.name
        selector = self.cache.selectors.get(name)
        if selector is None or selector.metadata.deletion_timestamp is not None:
            return Done("deleted: its rules go with it (owner references)")
        outcome = await self._evaluate(selector)
        pending: RuleDiff | None = None
        dry: DryRun | None = None
        if isinstance(outcome, Invalid):
            self._report_invalid(selector, outcome)
        else:
            self.selected[name] = len(outcome.devices)
            if self.rules_api is not None:
                pending = await self._write_rules(selector, outcome, self.rules_api)
            if selector.spec.taint.effect == EFFECT_NONE:
                dry = dry_run(selector.spec.taint, outcome.devices, self.cache.claims.values())
        status = selector_status(
            selector,
            outcome,
            rules_available=self.rules_api is not None,
            pending=pending,
            rules=self.cache.rules_of(selector.metadata.uid),
            dry_run=dry,
        )
        if needs_write(selector.status, status):
            await self._write_status(selector, status)
        return Done()

    async def _evaluate(self, selector: TaintSelector) -> Selection | Invalid:
        async with self._evaluating:
            slices, classes = list(self.cache.slices.values()), dict(self.cache.classes)
            started = time.monotonic()
            outcome = await asyncio.to_thread(evaluate, selector.spec, slices, classes)
        metrics.evaluation_duration.observe(time.monotonic() - started)
        metrics.evaluations.labels(result="invalid" if isinstance(outcome, Invalid) else "valid").inc()
        return outcome

    def _report_invalid(self, selector: TaintSelector, outcome: Invalid) -> None:
        """A Warning Event when the selector becomes invalid, or invalid for another reason."""
        previous = find(selector.status.get("conditions"), INVALID)
        seen = (
            previous is not None
            and previous.get("status") == TRUE
            and previous.get("reason") == outcome.reason
        )
        if seen and selector.status.get("observedGeneration") == selector.metadata.generation:
            return
        log.warning("invalid: %s", outcome.message, extra={"object": f"{KIND} {selector.metadata.name}"})
        self.runtime.events.record(_selector_ref(selector), WARNING, EVENT_INVALID, outcome.message)

    async def _write_rules(
        self, selector: TaintSelector, outcome: Selection, rules_api: ServedResource
    ) -> RuleDiff:
        """Apply the diff; what is left is the conflicts, since every write either succeeded or raised."""
        desired = desired_rules(selector, outcome.devices, rules_api.api_version)
        diff = diff_rules(selector.metadata.uid, desired, self.cache.rules_of(selector.metadata.uid, desired))
        client = self.runtime.client
        calls: list[Callable[[], Awaitable[None]]] = []

        async def create(body: Mapping[str, Any]) -> None:
            try:
                await client.create(rules_api.path(), body)
            except ApiError as err:
                if err.status != 409:  # AlreadyExists: the watch brings it, the next pass compares it
                    raise
            metrics.rule_writes.labels(operation="create").inc()

        async def update(rule: str, patch: Mapping[str, Any]) -> None:
            try:
                await client.patch(rules_api.path(rule), patch)
            except ApiError as err:
                if not err.not_found:
                    raise
            metrics.rule_writes.labels(operation="update").inc()

        async def delete(rule: str, uid: str) -> None:
            try:
                await client.delete(rules_api.path(rule), uid=uid)
            except ApiError as err:
                # 404: gone already; 409: the UID precondition failed, the name is someone else's now.
                if not (err.not_found or err.conflict):
                    raise
            metrics.rule_writes.labels(operation="delete").inc()

        calls += [functools.partial(create, body) for body in diff.create]
        calls += [functools.partial(update, item.name, item.patch) for item in diff.update]
        calls += [
            functools.partial(delete, name, self.cache.rules[name].metadata.uid) for name in diff.delete
        ]
        await _bounded(calls, WRITE_CONCURRENCY)
        if calls:
            log.info(
                "rules written: %d created, %d updated, %d deleted",
                len(diff.create),
                len(diff.update),
                len(diff.delete),
                extra={"object": f"{KIND} {selector.metadata.name}"},
            )
        return RuleDiff(conflicts=diff.conflicts)

    async def _write_status(self, selector: TaintSelector, status: Mapping[str, Any]) -> None:
        """Server-side apply of the whole status; ``metadata.uid`` keeps it off a re-created namesake."""
        body = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": selector.metadata.name, "uid": selector.metadata.uid},
            "status": dict(status),
        }
        path = SELECTORS.path(selector.metadata.name, subresource="status")
        try:
            await self.runtime.client.apply(path, body, self.runtime.field_manager)
        except ApiError as err:
            if not err.not_found:
                raise


async def _bounded(calls: list[Callable[[], Awaitable[None]]], limit: int) -> None:
    """Run the calls with at most ``limit`` in flight; the first failure is raised after all finished."""
    semaphore = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[None]]) -> None:
        async with semaphore:
            await call()

    results = await asyncio.gather(*(one(call) for call in calls), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
