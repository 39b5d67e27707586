"""The resourceclaim operator: kube-controller-manager's ``resourceclaim-controller``, out of tree.

It creates ResourceClaims from the ResourceClaimTemplates that pods reference, reserves
allocated claims for pods that bypass the scheduler, and releases, deallocates and deletes
claims whose consumers are gone (spec: ``resourceclaim.md``).

Layout, from the bottom up; only the syncs (through the core's executor), ``controller`` and
``probe`` talk to the API:

- ``constants``: names, annotations, limits shared by every module.
- ``settings``: the process flags, ``--workload-claims`` on top of every in-tree replacement's.
- ``models``: typed projections of Pods, ResourceClaims and ResourceClaimTemplates.
- ``naming``: the proportional ``generateName`` truncation.
- ``resolution``: the definitions D1-D6 and the routing of pod events to work keys.
- ``cache``: the watch caches, their lookup maps, the just-created record and the LRU of
  deleted pod and PodGroup UIDs; applying a watch event returns the keys to enqueue.
- ``bodies``: the request bodies the syncs send.
- ``metric_labels``: label values of the operator's metrics.
- ``metrics``: the create counter and the scrape-time claims gauge.
- ``creation``: the claims of template entries; a sync that creates one decides in passes, each
  executed before the next is decided from the answer (the created claim's name).
- ``pod_sync``, ``claim_sync`` and ``group_sync``: the ``pod``, ``claim`` and ``podgroup``
  syncs: pure functions that return :class:`operators.core.plan.Plan` s, and the short loop that
  reads, decides and has :func:`operators.core.plan.execute` carry out each plan in turn.
- ``controller``: parses watch events into the cache and hands each work key to its sync.
- ``probe``: asks, before the first write, whether kube-controller-manager's
  resourceclaim-controller runs, with a pod only that controller would answer.
- ``operator``: ``DEFINITION`` for ``dra-operators run resourceclaim`` (its four watches: pods,
  claims, templates, and PodGroups where they are served and ``--workload-claims`` is not
  ``off``) and ``API_CALLS``, which ``manifests/resourceclaim/rbac.yaml`` grants exactly.
"""
