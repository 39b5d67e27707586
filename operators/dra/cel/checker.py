"""Compile-time checks: reject what the Kubernetes DRA CEL environment would reject at admission.

cel-python parses any CEL and only notices an unknown function when it calls it, and it carries
extras of its own (``reduce``, ``.min()`` as a macro). Kubernetes type-checks a selector when it
is stored, so an expression that names an undeclared variable or function, calls a function with
the wrong number of arguments, or uses a global function as a method never reaches a device. This
walk over the parse tree gives the same early, per-expression verdict:

* the only free variable is ``device``; macro and ``cel.bind`` variables are scoped to their body;
* every call must name a function of the DRA environment, in its call style (``size(x)`` and
  ``x.size()`` are both declared; ``sign`` is declared only as ``sign(q)``), with a declared arity;
* macros (``all``, ``exists``, ``exists_one``, ``map``, ``filter``, ``sortBy``, ``has``,
  ``cel.bind``) need a simple name as their variable, and ``has()`` a field selection.

Full static typing is not attempted: a type mismatch surfaces when evaluating a device, with the
same message Kubernetes would give at that point.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lark

Tree = lark.Tree[Any]

__all__ = ["GLOBAL_ARITIES", "MEMBER_ARITIES", "NAMESPACED_ARITIES", "check", "sole_ident"]

GLOBAL_ARITIES: dict[str, frozenset[int]] = {
    name: frozenset(arities)
    for name, arities in {
        "size": {1},
        "int": {1},
        "uint": {1},
        "double": {1},
        "string": {1},
        "bytes": {1},
        "bool": {1},
        "duration": {1},
        "timestamp": {1},
        "type": {1},
        "dyn": {1},
        "has": {1},
        "matches": {2},
        "quantity": {1},
        "isQuantity": {1},
        "sign": {1},
        "semver": {1, 2},
        "isSemver": {1, 2},
    }.items()
}

NAMESPACED_ARITIES: dict[str, frozenset[int]] = {
    "cel.bind": frozenset({3}),
    "strings.quote": frozenset({1}),
    "lists.range": frozenset({1}),
    "sets.contains": frozenset({2}),
    "sets.equivalent": frozenset({2}),
    "sets.intersects": frozenset({2}),
}

_TIME_METHODS: tuple[str, ...] = (
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getMonth",
)
_TIME_METHODS += ("getHours", "getMilliseconds", "getMinutes", "getSeconds")

MEMBER_ARITIES: dict[str, frozenset[int]] = {
    name: frozenset(arities)
    for name, arities in {
        # CEL standard methods
        "size": {0},
        "contains": {1},
        "startsWith": {1},
        "endsWith": {1},
        "matches": {1},
        **{name: {0, 1} for name in _TIME_METHODS},
        # macros
        "all": {2},
        "exists": {2},
        "exists_one": {2},
        "map": {2, 3},
        "filter": {2},
        "sortBy": {2},
        # strings extension, version 2
        "charAt": {1},
        "indexOf": {1, 2},
        "lastIndexOf": {1, 2},
        "lowerAscii": {0},
        "upperAscii": {0},
        "replace": {2, 3},
        "split": {1, 2},
        "substring": {1, 2},
        "trim": {0},
        "join": {0, 1},
        "format": {1},
        # lists extension, version 3, and the Kubernetes list library
        "slice": {2},
        "flatten": {0, 1},
        "sort": {0},
        "reverse": {0},
        "distinct": {0},
        "isSorted": {0},
        "sum": {0},
        "min": {0},
        "max": {0},
        "includes": {1},
        # Kubernetes quantity and semver libraries
        "isInteger": {0},
        "asInteger": {0},
        "asApproximateFloat": {0},
        "add": {1},
        "sub": {1},
        "isGreaterThan": {1},
        "isLessThan": {1},
        "compareTo": {1},
        "major": {0},
        "minor": {0},
        "patch": {0},
    }.items()
}

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "sortBy"})
TYPE_NAMES = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
)
VARIABLES = frozenset({"device"})
DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})

# Declared by the Kubernetes base environment, outside what DRA selectors are documented to need.
_NOT_IMPLEMENTED = frozenset(
    {"ip", "isIP", "cidr", "isCIDR", "url", "isURL", "find", "findAll", "getScheme", "getHost"}
    | {"getHostname", "getPort", "getEscapedPath", "getQuery", "containsIP", "containsCIDR", "prefixLength"}
    | {
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
    }
    | {"masked", "validate", "named", "transformList", "transformMap", "transformMapEntry"}
    | {"optional.of", "optional.none", "optional.ofNonZeroValue", "hasValue", "value", "orValue", "or"}
)

_CHAIN = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication"})
_CHAIN |= {"unary", "member", "primary"}


class CheckError(Exception):
    """The expression would not compile in the DRA environment; the message says why."""


def _unwrap(tree: Tree) -> Tree:
    """Descend through the precedence levels that wrap a single operand."""
    while tree.data in _CHAIN and len(tree.children) == 1 and isinstance(tree.children[0], lark.Tree):
        tree = tree.children[0]
    return tree


def sole_ident(tree: Tree) -> str | None:
    """The name if ``tree`` is nothing but an identifier, else None."""
    inner = _unwrap(tree)
    if inner.data == "ident" and isinstance(inner.children[0], lark.Token):
        return str(inner.children[0].value)
    return None


def arguments(tree: Tree, index: int) -> list[Tree]:
    """The argument expressions of a call node whose exprlist, if any, is child ``index``."""
    if len(tree.children) <= index or not isinstance(tree.children[index], lark.Tree):
        return []
    exprlist = tree.children[index]
    assert isinstance(exprlist, lark.Tree)
    return [child for child in exprlist.children if isinstance(child, lark.Tree)]


def _arity(name: str, table: dict[str, frozenset[int]], count: int, style: str) -> None:
    if name not in table:
        if name in _NOT_IMPLEMENTED:
            raise CheckError(
                f"'{name}' is part of the Kubernetes CEL environment, but dra-operators does not implement it"
            )
        if style == "method" and name in GLOBAL_ARITIES:
            raise CheckError(f"'{name}' is a global function, not a method: write {name}(x), not x.{name}()")
        if style == "function" and name in MEMBER_ARITIES:
            raise CheckError(f"'{name}' is a method, not a global function: write x.{name}(...)")
        raise CheckError(f"undeclared reference to '{name}'")
    if count not in table[name]:
        raise CheckError(f"found no matching overload for '{name}' with {count} argument(s)")


def _bound_name(tree: Tree, macro: str) -> str:
    name = sole_ident(tree)
    if name is None:
        raise CheckError(f"{macro}() needs a simple name as its variable")
    return name


_SHADOWED = "#device"  # not an identifier, so it cannot clash with a name in the expression


def _bind(scope: frozenset[str], variable: str) -> frozenset[str]:
    return scope | {variable} | ({_SHADOWED} if variable == "device" else set())


def _children(tree: Tree) -> Iterator[Tree]:
    return (child for child in tree.children if isinstance(child, lark.Tree))


def check(tree: Tree, scope: frozenset[str] = VARIABLES) -> None:
    """Raise CheckError for the first construct the DRA CEL environment would reject."""
    data = tree.data
    if data == "member_dot_arg":
        _check_method(tree, scope)
        return
    if data == "ident_arg":
        name = str(tree.children[0])
        args = arguments(tree, 1)
        _arity(name, GLOBAL_ARITIES, len(args), "function")
        if name == "has" and _unwrap(args[0]).data != "member_dot":
            raise CheckError("invalid argument to has() macro: it takes a field selection such as has(a.b)")
        for arg in args:
            check(arg, scope)
        return
    if data == "dot_ident_arg":
        raise CheckError("functions called with a leading '.' are not supported")
    if data == "member_object":
        raise CheckError("message construction is not available in DRA selectors")
    if data == "member_dot":
        target = tree.children[0]
        assert isinstance(target, lark.Tree)
        field = str(tree.children[1])
        # device is an object type in Kubernetes: an unknown field fails type-checking.
        if sole_ident(target) == "device" and _SHADOWED not in scope and field not in DEVICE_FIELDS:
            raise CheckError(f"undefined field '{field}'")
    if data in ("ident", "dot_ident"):
        name = str(tree.children[0])
        if name not in scope and name not in TYPE_NAMES:
            raise CheckError(f"undeclared reference to '{name}'")
        return
    for child in _children(tree):
        check(child, scope)


def _check_method(tree: Tree, scope: frozenset[str]) -> None:
    target = tree.children[0]
    assert isinstance(target, lark.Tree)
    name = str(tree.children[1])
    args = arguments(tree, 2)
    namespace = sole_ident(target)
    if namespace is not None and namespace not in scope:
        qualified = f"{namespace}.{name}"
        _arity(qualified, NAMESPACED_ARITIES, len(args), "function")
        if qualified == "cel.bind":
            variable = _bound_name(args[0], "cel.bind")
            check(args[1], scope)
            check(args[2], _bind(scope, variable))
            return
        for arg in args:
            check(arg, scope)
        return
    if name in ("all", "exists", "exists_one") and len(args) == 3:
        raise CheckError(f"two-variable {name}() comprehensions are not implemented by dra-operators")
    _arity(name, MEMBER_ARITIES, len(args), "method")
    check(target, scope)
    if name in MACROS:
        variable = _bound_name(args[0], name)
        for arg in args[1:]:
            check(arg, _bind(scope, variable))
        return
    for arg in args:
        check(arg, scope)


_LITERAL_TYPES = {
    "INT_LIT": "int",
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "STRING_LIT": "string",
    "MLSTRING_LIT": "string",
    "BYTES_LIT": "bytes",
    "NULL_LIT": "null_type",
}
_CALL_TYPES = {
    "quantity": "kubernetes.Quantity",
    "semver": "kubernetes.Semver",
    "size": "int",
    "sign": "int",
    "int": "int",
    "uint": "uint",
    "double": "double",
    "string": "string",
    "bytes": "bytes",
    "duration": "google.protobuf.Duration",
    "timestamp": "google.protobuf.Timestamp",
    "type": "type",
}
_DEVICE_FIELD_TYPES = {"driver": "string", "attributes": "map(string, map(string, dyn))"}
_DEVICE_FIELD_TYPES |= {"capacity": "map(string, map(string, kubernetes.Quantity))"}


def static_result_type(tree: Tree) -> str | None:
    """The result type when it is evidently not bool (a literal, a typed call, a device field), else None.

    Kubernetes refuses such selectors when they are stored ("must evaluate to bool"); without this
    check they would only fail once a device is evaluated, and pass unnoticed while none exists.
    """
    node = _unwrap(tree)
    if node.data == "literal":
        token = node.children[0]
        return _LITERAL_TYPES.get(token.type) if isinstance(token, lark.Token) else None
    if node.data in ("list_lit", "map_lit"):
        return "list" if node.data == "list_lit" else "map"
    if node.data == "ident_arg":
        return _CALL_TYPES.get(str(node.children[0]))
    if node.data == "ident" and str(node.children[0]) == "device":
        return "kubernetes.DRADevice"
    target = node.children[0]
    if node.data == "member_dot" and isinstance(target, lark.Tree) and sole_ident(target) == "device":
        return _DEVICE_FIELD_TYPES.get(str(node.children[1]))
    return None
