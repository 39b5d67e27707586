"""dra-operators: the Kubernetes DRA controllers as out-of-tree kopf operators.

Layering, checked by ``make lint``: :mod:`operators.core` (infrastructure) <- :mod:`operators.dra`
(the DRA domain) <- the operators, none of which imports another. Domain logic lives in modules
without kopf imports, so it is unit-testable on plain data; only :mod:`operators.core.runtime`
imports kopf, and each operator declares its watches in its ``operator`` module.
"""

from .core import lean_imports

lean_imports.install()

__all__ = ["OPERATOR_NAMES", "__version__"]

__version__ = "0.1.0"

OPERATOR_NAMES = (
    "resourceclaim",
    "devicetaint",
    "poolstatus",
    "bindingattacher",
    "taintselector",
    "devicehealth",
)
