"""``kubectl dra``: a kubectl plugin that asks the dra-operators about DRA devices.

* ``kubectl dra pools [--driver D] [--pool P]``: devices per pool (total, allocated, available,
  unavailable, partition types, shared capacity), answered by the poolstatus operator through a
  temporary ResourcePoolStatusRequest;
* ``kubectl dra taint-preview <selector> [--effect NoExecute]``: the devices, claims and pods a
  DeviceTaintRule would affect, answered by the devicetaint operator's dry run (effect ``None``).

It is user tooling: it uses the project's API client and pure helpers from :mod:`operators.core`,
never kopf. Modules: :mod:`.cli` (arguments, exit codes), :mod:`.pools` and :mod:`.preview` (the
API conversations), :mod:`.poolview` and :mod:`.previewmodel` (pure: documents and tables),
:mod:`.session` (connection, discovery, temporary objects), :mod:`.tables`, :mod:`.kubeconfig`,
:mod:`.durations`, :mod:`.errors`.
"""

from .cli import main

__all__ = ["main"]
