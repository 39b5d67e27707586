"""The device-health operator: taint devices that their driver or the kubelet report unhealthy.

Upstream reports device health in two places and acts on neither: a driver taints its own devices
in its ResourceSlices, and the kubelet reports each container's devices in
``allocatedResourcesStatus``. A ``DeviceHealthPolicy`` (``dra-operators.io/v1alpha1``) says which
devices (``scope``), which signals and for how long (``signals``), what to do (``action``) and how
much at once (``maxUnavailable``); the operator keeps one DeviceTaintRule per tainted device, owned
by the policy, and devicetaint evicts (docs/device-health.md).

Module map (everything but the controller is pure: no kopf, no API calls):

* :mod:`.models`: the policy resource, and projections of pods, claims and DeviceTaintRules;
* :mod:`.validation`: the spec's values, or why it cannot act;
* :mod:`.signals`: the signalled devices from slice taints and the kubelet, and their tracks;
* :mod:`.guard`: ``maxUnavailable``;
* :mod:`.rules`: the DeviceTaintRules the policy owns;
* :mod:`.dryrun`: the pods a taint would evict;
* :mod:`.status`: conditions ``Ready`` and ``Active``;
* :mod:`.decide`: one pass as a plan of writes for the core's executor.
"""
