"""``kubectl dra``: a kubectl plugin that asks the dra-operators about DRA devices.

* ``kubectl dra pools [--driver D] [--pool P]``: devices per pool (total, allocated, available,
  unavailable, partition types, shared capacity), answered by the poolstatus operator through a
  temporary ResourcePoolStatusRequest;
* ``kubectl dra taint-preview <selector> [--effect NoExecute]``: the devices, claims and pods a
  DeviceTaintRule would affect, answered by the devicetaint operator's dry run (effect ``None``);
* ``kubectl dra taint`` / ``untaint`` / ``drain node|pool``: device maintenance. A taint shows that
  preview, asks (or ``--yes``), and creates a DeviceTaintRule or, for a class or CEL, a
  DeviceTaintSelector, labelled so that ``untaint`` finds it; ``drain`` taints NoSchedule, then
  NoExecute, and waits for the pods;
* ``kubectl dra completion bash|zsh``: a completion script generated from the parser.

It is user tooling: it uses the project's API client and pure helpers from :mod:`operators.core`,
never kopf. Modules: :mod:`.cli` (arguments, exit codes), :mod:`.pools`, :mod:`.preview` and
:mod:`.maintain` (the API conversations), :mod:`.commands` (taint, untaint and drain from preview
to result), :mod:`.poolview`, :mod:`.previewmodel` and :mod:`.taintmodel` (pure: documents,
tables, names, bodies, decisions), :mod:`.console` (question and progress), :mod:`.completion`,
:mod:`.session` (connection, discovery, temporary objects), :mod:`.tables`, :mod:`.kubeconfig`,
:mod:`.durations`, :mod:`.errors`.
"""

from .cli import main

__all__ = ["main"]
