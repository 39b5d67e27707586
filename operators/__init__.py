"""dra-operators: the Kubernetes DRA controllers as out-of-tree kopf operators.

Layering: every operator subpackage imports :mod:`operators.core`; the core never imports
an operator. Domain logic lives in modules without kopf imports, so it is unit-testable
on plain data; only each operator's ``handlers`` module touches kopf.
"""

from .core import lean_imports

lean_imports.install()

__all__ = ["OPERATOR_NAMES", "__version__"]

__version__ = "0.1.0"

OPERATOR_NAMES = ("resourceclaim", "devicetaint", "poolstatus", "bindingattacher", "taintselector")
