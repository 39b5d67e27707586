"""Binding-condition attacher: attaches devices before kube-scheduler binds a pod (KEP-5007).

For every allocated ResourceClaim result that carries ``bindingConditions`` and belongs to a
driver with a ready ``DeviceAttachPolicy``, the attacher resolves the target node, runs the
policy's attach action and reports the outcome in ``status.devices[].conditions``, the only
place kube-scheduler reads it. Because the API server erases ``status.devices`` on
deallocation, every attachment is also recorded in a ``DeviceAttachment`` ledger object in the
operator namespace; detach is driven from that ledger.

Module map (all of them free of kopf and of Kubernetes API calls):

- ``models``: typed projections of claims, slices, pods, nodes and the two project CRDs.
- ``identity``: allocation identity, ``attachmentKey`` and device keys.
- ``selection``: which claim results are ours, and the target node (``bindsToNode`` through
  the node selector).
- ``statemachine``: the per-record state machine as pure transitions, what it observes
  (``Observation``) and answers (``Step``), the attach deadline and backoff.
- ``decide``: the pure steps of a claim sync: the ``Observation`` from the claim, the ledger
  and runtime facts, the transition a record takes, what the claim will show, Event texts,
  failure streaks.
- ``devicestatus``: the ``status.devices`` entries this attacher owns, and the apply body.
- ``ledger``: ``DeviceAttachment`` manifests and the in-memory ledger index.
- ``policy``: validation of ``DeviceAttachPolicy`` into status conditions, and the book of
  policy states the reconciler reads.
- ``actions``: the attach-action adapters (Python entry point, webhook, exec, noop, test).
- ``api``: the stable public API for third-party Python actions.

Runtime side:

- ``operator``: the ``DEFINITION`` (the watches of claims, policies and ledger records) and
  ``API_CALLS``.
- ``settings``: the process flags.
- ``controller``: watch callbacks in, keys out; dispatches claim, policy and sweep keys.
- ``collaborators``: ``Collaborators``, what the controller, the pipeline and the policy sync
  share (settings, client, Events, queue, cache, API layer, calls), built once from the runtime.
- ``pipeline``: one claim's sync as one linear pipeline (read, decide, write, return a
  ``Result``): its records, their action calls, its ``status.devices`` entries.
- ``policysync``: policy evaluation, action instances, SelfSubjectAccessReview, status.
- ``cache``: the ``ClusterCache`` every sync reads (claim projections, the ledger index, the
  policy book) and the work-queue keys.
- ``kube``: the API layer of a claim sync (status apply, ledger writes, point reads, failure
  taints) and the Test action's inventory mirror; a write built on stale data answers a
  ``Requeue`` that the pipeline returns.
- ``calls``: action requests, one action call, and the calls in flight.
- ``metrics``: the Prometheus metrics; the gauges are computed at scrape time from the
  controller.
"""
