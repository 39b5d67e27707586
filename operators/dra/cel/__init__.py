"""The Kubernetes DRA CEL environment on cel-python: what DeviceClass and device selectors evaluate.

Kubernetes compiles a device selector in the environment of
``k8s.io/dynamic-resource-allocation/cel``: one variable, ``device`` (driver, attributes,
capacity, allowMultipleAllocations), on top of the Kubernetes base library. This package provides
the part of that environment a device selector can meaningfully use, with Kubernetes' semantics:

* the ``device`` variable (device.py), with unqualified attribute names in the driver's domain;
* ``quantity()``/``isQuantity()`` and the Quantity methods (quantity.py);
* ``semver()``/``isSemver()`` and the Semver methods (semver.py);
* the string extension at version 2 (strings.py);
* the list extension at version 3, Kubernetes' list library and the set extension (lists.py);
* ``cel.bind`` and the standard macros (program.py), cel-go's equality and ordering (values.py);
* a cost limit per evaluation, as kube-scheduler enforces upstream's (program.py, ``COST_LIMIT``).

Out of scope, and rejected at compile time with a message saying so: the IP, CIDR, URL, regex
``find``, ``format.named``, authorizer, optional-type and two-variable comprehension libraries.

Usage::

    expression = compile_expression('device.attributes["gpu.example.com"].uuid == "GPU-1"')
    expression.matches(CelDevice(driver="gpu.example.com", attributes={...}))

:class:`CelCompileError` and :class:`CelEvaluationError` (both :class:`CelError`) carry the expression
and a one-line detail. Nothing else escapes: a bug in the interpreter is reported as an evaluation
error too, so a bad selector can never stop an operator.
"""

from .device import CelDevice, DeviceAttribute, DeviceCapacity, split_qualified_name
from .errors import CelCompileError, CelError, CelEvaluationError
from .program import (
    COST_LIMIT,
    MAX_EXPRESSION_LENGTH,
    CompiledExpression,
    CostBudget,
    PreparedDevice,
    compile_expression,
)

__all__ = [
    "COST_LIMIT",
    "MAX_EXPRESSION_LENGTH",
    "CelCompileError",
    "CelDevice",
    "CelError",
    "CelEvaluationError",
    "CompiledExpression",
    "CostBudget",
    "DeviceAttribute",
    "DeviceCapacity",
    "PreparedDevice",
    "compile_expression",
    "split_qualified_name",
]
