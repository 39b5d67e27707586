"""The resourceclaim operator: kube-controller-manager's ``resourceclaim-controller``, out of tree.

It creates ResourceClaims from the ResourceClaimTemplates that pods reference, reserves
allocated claims for pods that bypass the scheduler, and releases, deallocates and deletes
claims whose consumers are gone (spec: ``resourceclaim.md``).

Layout, from the bottom up; only ``controller`` and ``probe`` talk to the API:

- ``constants``: names, annotations, limits shared by every module.
- ``settings``: the process flags, ``--workload-claims`` on top of every in-tree replacement's.
- ``models``: typed projections of Pods, ResourceClaims and ResourceClaimTemplates.
- ``naming``: the proportional ``generateName`` truncation.
- ``resolution``: the definitions D1-D6 and the routing of pod events to work keys.
- ``cache``: the watch caches, their lookup maps, the just-created record and the LRU of
  deleted pod and PodGroup UIDs; applying a watch event returns the keys to enqueue.
- ``plan``: the step protocol between the pure planners and the I/O layer.
- ``bodies``: the request bodies the planners send.
- ``pod_sync``, ``claim_sync`` and ``group_sync``: the ``pod``, ``claim`` and ``podgroup``
  syncs as planners.
- ``metric_labels``: label values of the operator's metrics.
- ``metrics``: the create counter and the scrape-time claims gauge.
- ``controller``: the I/O layer; parses watch events into the cache and executes the
  planners' actions with the API client.
- ``probe``: asks, before the first write, whether kube-controller-manager's
  resourceclaim-controller runs, with a pod only that controller would answer.
- ``operator``: ``DEFINITION`` for ``dra-operators run resourceclaim`` (its four watches: pods,
  claims, templates, and PodGroups where they are served and ``--workload-claims`` is not
  ``off``) and ``API_CALLS``, which ``manifests/resourceclaim/rbac.yaml`` grants exactly.
"""
