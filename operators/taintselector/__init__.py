"""The taint-selector operator: taint devices chosen by DeviceClass, CEL, driver, pool or name.

Kubernetes 1.35 removed ``deviceClassName`` and CEL ``selectors`` from the built-in
DeviceTaintRule, yet the DRA documentation still describes tainting "the devices selected by a
DeviceClass" and "one physical instance" found by a vendor's unique-ID attribute. The project CRD
``DeviceTaintSelector`` (``dra-operators.io/v1alpha1``) brings that back: the operator evaluates
its selection against the published ResourceSlices and keeps one built-in DeviceTaintRule per
selected device, owned by the selector. The scheduler and the devicetaint operator then do the rest.

Module map (everything listed is pure: no kopf, no API calls):

* :mod:`.models`: the selector resource, and projections of ResourceSlice, DeviceClass and
  DeviceTaintRule;
* :mod:`.selection`: which devices a selector selects, or :class:`~.selection.Invalid` with the
  expression and the error; CEL comes from :mod:`operators.dra.cel`;
* :mod:`.rules`: the desired DeviceTaintRules, the diff against the existing ones, and the
  aggregated ``EvictionInProgress``;
* :mod:`.status`: the selector's status and conditions;
* :mod:`.decide`: one pass as a plan of writes for the core's executor.

A reconcile pass is: ``evaluate`` -> ``decide`` (``desired_rules`` -> ``diff_rules`` -> the rule
writes, none when the outcome is Invalid -> ``selector_status`` with what is still pending) ->
the core's ``execute``.
"""
