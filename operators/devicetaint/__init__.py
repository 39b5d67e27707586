"""The devicetaint operator: evicts pods whose allocated devices carry an untolerated NoExecute taint.

It replaces kube-controller-manager's ``device-taint-eviction-controller`` (spec: devicetaint.md).

Layout, from the bottom up; every module below is pure (no kopf, no API calls) and unit-tested:

* :mod:`.models`: typed projections of the Pod, ResourceClaim, ResourceSlice and DeviceTaintRule fields
  the operator reads, and the work items of its queue;
* :mod:`.pools`: ResourceSlices grouped into pools, where only the newest generation counts;
* :mod:`.evaluation`: which taints hit a claim, which claims affect a pod, and when it must go;
* :mod:`.messages`: the ``EvictionInProgress`` condition of a DeviceTaintRule and when to write it;
* :mod:`.podeviction`: what to do for one pod work item, and the bodies of the writes;
* :mod:`.pacing`: ``dra-operators.io/evictions-per-minute``, the token buckets that pace a rule's evictions;
* :mod:`.cache`: the in-memory model fed by watch events; each event returns the work to enqueue.

Watch handlers call :class:`.cache.ClusterCache` and enqueue what it returns; workers ask it for a
decision per work item, perform the API calls, and report the outcome back.

On top of them, the wiring:

* :mod:`.apis`: which API versions are served (the runtime finds the DeviceTaintRule one: v1, v1beta2
  or v1alpha3);
* :mod:`.controller`: the I/O layer, feeding watch events to the state and executing its decisions;
* :mod:`.metrics`: ``dra_operators_devicetaint_*``;
* :mod:`.operator`: ``DEFINITION`` for ``dra-operators run devicetaint`` (its watches), and ``API_CALLS``.
"""
