"""The pool-status operator: answers ResourcePoolStatusRequests once, pool by pool.

A user creates a request naming a driver (and optionally a pool and a limit); the
operator counts that driver's devices per pool as total, allocated, available and
unavailable, adds partition and sharing summaries, writes the answer into ``status``
once, and deletes the request after a TTL. Requests are served on the built-in
``resource.k8s.io/v1alpha3`` API when the cluster enables it and on the project CRD
``dra-operators.io/v1alpha1``, with one algorithm for both.

Module map (everything listed is pure: no kopf, no API calls):

* ``models``: typed projections of ResourceSlice, ResourceClaim, DeviceTaintRule and
  the request;
* ``pools``: grouping slices into pools at their newest generation, completeness;
* ``counts``: allocation results in use, taints, each device's availability and the counts;
* ``compatibility``: compatibility-group admission per counter set;
* ``partitions``: ``partitionSummary``;
* ``shareable``: ``shareableSummary``;
* ``messages``: exact validationError and condition texts, Go quoting, truncation;
* ``status``: the whole status and the grace-period decision (``compute_pools``, ``decide``);
* ``ttl``: when a request is deleted;
* ``surfaces``: the two request APIs and which of them to serve;
* ``cache``: the in-memory projections, indexed per pool, and each pool's answer kept
  until its slices, held devices or the taint rules change;
* ``writes``: the status patch and the meaning of each answer to it;
* ``settings``: the operator's options (durations in Go syntax).

The impure rest, thin on purpose: ``controller`` (work items, status writes, TTL
deletes, discovery re-checks), ``metrics`` and ``operator`` (the definition with its watches, and
the API calls the RBAC grants).
"""
