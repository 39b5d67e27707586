"""Compiling and evaluating DRA selector expressions on cel-python.

cel-python supplies the parser and the tree-walking interpreter. This module adapts the interpreter
where cel-go, which Kubernetes uses, behaves differently in ways a selector can observe:

* field selection and indexing fail with cel-go's "no such key: <name>";
* macros (``all``, ``exists``, ``exists_one``, ``map``, ``filter``, ``sortBy``) follow cel-go's
  error rules: ``all`` is false as soon as one element is false, even if another one failed, and
  ``exists`` true as soon as one is true; ``map`` also takes a filter (three arguments);
* ``cel.bind``, ``strings.quote``, ``lists.range`` and ``sets.*`` are namespaced functions, not
  method calls on an unknown ``cel``/``strings``/... variable;
* cel-python's own additions (``reduce``, ``.min()`` as a macro) are not part of the language.

A compiled expression is cached by its text (bounded, least recently used first out): selectors
are re-evaluated on every ResourceSlice change, parsing is the expensive step, and the same
DeviceClass selectors appear in many objects. Failed compilations are cached too.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Context, Evaluator

from . import checker, lists, quantity, semver, strings
from .arithmetic import ARITHMETIC
from .device import CelDevice, device_variable
from .errors import CelCompileError, CelEvaluationError, FunctionError, cel_function, no_overload
from .values import OPERATORS, type_name

__all__ = [
    "CACHE_SIZE",
    "COST_LIMIT",
    "MAX_EXPRESSION_LENGTH",
    "CompiledExpression",
    "CostBudget",
    "PreparedDevice",
    "compile_expression",
]

Tree = lark.Tree[Any]

# cel-python logs every activation, with the whole device map, at DEBUG level; an operator started
# with debug logging would write that for every device of every selection.
logging.getLogger("celpy").setLevel(logging.WARNING)

MAX_EXPRESSION_LENGTH = 10 * 1024  # resource.k8s.io CELSelectorExpressionMaxLength
CACHE_SIZE = 1024

# Upstream bounds what one evaluation may cost (resource.k8s.io CELSelectorExpressionMaxCost,
# 1,000,000 cel-go cost units, "roughly 0.1 second"), and kube-scheduler enforces it at run time
# because admission only estimates. Here a step is one node of the expression's tree evaluated,
# plus one per SIZE_STEP characters or elements of each string or list value produced, so that
# repeated concatenation runs out of budget before it runs out of memory. This interpreter takes
# 3-6 s per million steps on one core, far slower than cel-go, so an evaluation stops after
# COST_LIMIT steps (under a second). A device has at most 48 attribute values, so a selector
# reading them, even iterating over list attributes, stays far below; what the limit stops is an
# expression that kube-apiserver admits (its estimate stays under upstream's limit) but that
# would hold a worker for minutes per device here.
COST_LIMIT = 100_000
SIZE_STEP = 16
COST_MESSAGE = (
    f"operation cancelled: actual cost limit exceeded (more than {COST_LIMIT} evaluation steps "
    "for one device)"
)


class _CostExceeded(Exception):
    """Raised out of the interpreter, past every handler of CEL error values, to stop it."""


class _Budget:
    """The steps one evaluation has left, shared by the sub-evaluators of its macros."""

    __slots__ = ("remaining",)

    def __init__(self, limit: int) -> None:
        self.remaining = limit


class CostBudget:
    """Steps left to a series of evaluations, such as one selection over every published device:
    each evaluation stays under COST_LIMIT, and all of them together under ``limit``. Upstream has
    no such total (its own steps are cheap); here a selector that costs little per device can
    still hold a worker for hours over a hundred thousand devices."""

    __slots__ = ("limit", "remaining")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.remaining = limit

    @property
    def message(self) -> str:
        return (
            f"operation cancelled: total cost limit exceeded (more than {self.limit} evaluation steps "
            "for all devices together)"
        )


def _by_receiver(
    name: str, *choices: tuple[type | tuple[type, ...], Callable[..., Any]]
) -> Callable[..., Any]:
    """One CEL function name with overloads for several receiver types (``indexOf`` on strings and lists)."""

    @cel_function
    def dispatch(receiver: Any, *args: Any) -> Any:
        for kind, function in choices:
            if isinstance(receiver, kind):
                return function(receiver, *args)
        raise no_overload(name, receiver, *args)

    return dispatch


@cel_function
def _contains(text: Any, fragment: Any) -> celtypes.BoolType:
    if not isinstance(text, str) or not isinstance(fragment, str):
        raise no_overload("contains", text, fragment)
    return celtypes.BoolType(fragment in text)


def _function_table() -> dict[str, Callable[..., Any]]:
    table: dict[str, Callable[..., Any]] = {}
    table |= (
        quantity.FUNCTIONS | semver.FUNCTIONS | strings.FUNCTIONS | lists.FUNCTIONS | OPERATORS | ARITHMETIC
    )
    for name in ("indexOf", "lastIndexOf"):
        table[name] = _by_receiver(
            name, (str, strings.STRING_METHODS[name]), (list, lists.LIST_METHODS[name])
        )
    for name in ("compareTo", "isGreaterThan", "isLessThan"):
        table[name] = _by_receiver(
            name, (quantity.CelQuantity, quantity.FUNCTIONS[name]), (semver.CelSemver, semver.FUNCTIONS[name])
        )
    table["contains"] = _contains
    return table


FUNCTIONS = _function_table()


def _error(value: Any) -> CELEvalError:
    return (
        value
        if isinstance(value, CELEvalError)
        else CELEvalError(f"no such overload: expected bool, got {type_name(value)}")
    )


_TYPE_VALUES: dict[str, Any] = {
    "int": celtypes.IntType,
    "uint": celtypes.UintType,
    "double": celtypes.DoubleType,
    "bool": celtypes.BoolType,
    "string": celtypes.StringType,
    "bytes": celtypes.BytesType,
    "list": celtypes.ListType,
    "map": celtypes.MapType,
    "type": celtypes.TypeType,
}


class _Evaluator(Evaluator):
    """cel-python's interpreter with cel-go's field access, macros and namespaced functions."""

    def __init__(self, ast: Tree, activation: Any, budget: _Budget | None = None) -> None:
        super().__init__(ast, activation=activation)
        self.budget = budget if budget is not None else _Budget(COST_LIMIT)

    def sub_evaluator(self, ast: Tree) -> _Evaluator:
        return _Evaluator(ast, activation=self.activation, budget=self.budget)

    def _visit_tree(self, tree: Tree) -> Any:
        # lark's one entry for every node, whether visited alone or with its siblings.
        value = super()._visit_tree(tree)
        cost = 1 + len(value) // SIZE_STEP if isinstance(value, str | bytes | list) else 1
        budget = self.budget
        budget.remaining -= cost
        if budget.remaining < 0:
            raise _CostExceeded
        return value

    def _run(self, tree: Tree, bindings: dict[str, Any]) -> Any:
        try:
            return self.sub_evaluator(tree).evaluate(bindings)
        except CELEvalError as error:
            return error

    def primary(self, tree: Tree) -> Any:
        # A type name denotes the type, even where a conversion function of that name is overridden.
        child = tree.children[0]
        if isinstance(child, lark.Tree) and child.data == "ident":
            name = str(child.children[0])
            if name in _TYPE_VALUES:
                try:
                    self.activation.identifiers.resolve_name(self.activation.package, name)
                except KeyError:
                    return _TYPE_VALUES[name]
        return super().primary(tree)

    def member_dot(self, tree: Tree) -> Any:
        target = self.visit(tree.children[0])
        name = str(tree.children[1])
        if isinstance(target, CELEvalError):
            return target
        if isinstance(target, celtypes.MapType):
            try:
                return target[celtypes.StringType(name)]
            except KeyError:
                return CELEvalError(f"no such key: {name}")
        return CELEvalError(f"type '{type_name(target)}' does not support field selection")

    def member_index(self, tree: Tree) -> Any:
        target, index = self.visit_children(tree)
        for value in (target, index):
            if isinstance(value, CELEvalError):
                return value
        if isinstance(target, celtypes.MapType):
            if not celtypes.MapType.valid_key_type(index):
                return CELEvalError(f"unsupported key type: {type_name(index)}")
            try:
                return target[index]
            except (KeyError, TypeError):
                # TypeError: cel-python's int and uint refuse to compare while probing the dict.
                return CELEvalError(f"no such key: {index}")
        if isinstance(target, celtypes.ListType):
            if not isinstance(index, celtypes.IntType) or isinstance(index, celtypes.BoolType):
                return CELEvalError(f"unsupported index type '{type_name(index)}' in list")
            if not 0 <= index < len(target):
                return CELEvalError(f"index out of bounds: {index}")
            return target[index]
        return CELEvalError(f"found no matching overload for '_[_]' applied to '({type_name(target)})'")

    def member_dot_arg(self, tree: Tree) -> Any:
        target_tree = tree.children[0]
        name = str(tree.children[1])
        arg_trees = checker.arguments(tree, 2)
        namespace = checker.sole_ident(target_tree)
        if namespace is not None and f"{namespace}.{name}" in checker.NAMESPACED_ARITIES:
            return self._namespaced(f"{namespace}.{name}", arg_trees)
        target = self.visit(target_tree)
        if name in checker.MACROS:
            variable = checker.sole_ident(arg_trees[0]) or ""
            return self._macro(name, target, variable, arg_trees[1:])
        args = [self.visit(arg) for arg in arg_trees]
        return self._call(name, [target, *args])

    def _namespaced(self, name: str, arg_trees: list[Tree]) -> Any:
        if name == "cel.bind":
            variable = checker.sole_ident(arg_trees[0]) or ""
            # An erroneous value is bound as it is: it only fails the result if the body uses it.
            return self._run(arg_trees[2], {variable: self.visit(arg_trees[1])})
        return self._call(name, [self.visit(arg) for arg in arg_trees])

    def _call(self, name: str, args: list[Any]) -> Any:
        for arg in args:
            if isinstance(arg, CELEvalError):
                return arg
        function = self.activation.resolve_function(name)
        try:
            return function(*args)
        except (TypeError, AttributeError, ValueError, KeyError):
            # cel-python's own functions (startsWith, timestamps...) signal misuse this way; their
            # Python wording would only confuse, so report the call as cel-go does.
            kinds = ", ".join(type_name(arg) for arg in args)
            return CELEvalError(f"found no matching overload for '{name}' applied to '({kinds})'")

    def _macro(self, name: str, target: Any, variable: str, bodies: list[Tree]) -> Any:
        if isinstance(target, CELEvalError):
            return target
        if isinstance(target, celtypes.MapType) and name != "sortBy":
            items = list(target.keys())
        elif isinstance(target, celtypes.ListType):
            items = list(target)
        else:
            return CELEvalError(f"found no matching overload for '{name}' applied to '({type_name(target)})'")
        if name in ("all", "exists"):
            decisive = name == "exists"  # the element result that settles the answer at once
            failure: CELEvalError | None = None
            for item in items:
                result = self._run(bodies[0], {variable: item})
                if isinstance(result, celtypes.BoolType):
                    if bool(result) == decisive:
                        return celtypes.BoolType(decisive)
                else:
                    failure = failure or _error(result)
            return failure or celtypes.BoolType(not decisive)
        if name == "exists_one":
            count = 0
            for item in items:
                result = self._run(bodies[0], {variable: item})
                if not isinstance(result, celtypes.BoolType):
                    return _error(result)
                count += bool(result)
            return celtypes.BoolType(count == 1)
        if name == "sortBy":
            keys = [self._run(bodies[0], {variable: item}) for item in items]
            failed = next((key for key in keys if isinstance(key, CELEvalError)), None)
            return failed or cel_function(lists.sort_by_keys)(target, keys)
        return self._map_or_filter(name, items, variable, bodies)

    def _map_or_filter(self, name: str, items: list[Any], variable: str, bodies: list[Tree]) -> Any:
        predicate = bodies[0] if name == "filter" or len(bodies) == 2 else None
        transform = bodies[-1] if name == "map" else None
        results: list[Any] = []
        for item in items:
            if predicate is not None:
                keep = self._run(predicate, {variable: item})
                if not isinstance(keep, celtypes.BoolType):
                    return _error(keep)
                if not keep:
                    continue
            value = item if transform is None else self._run(transform, {variable: item})
            if isinstance(value, CELEvalError):
                return value
            results.append(value)
        return celtypes.ListType(results)


class _Runner(celpy.InterpretedRunner):
    def evaluate(self, context: Context) -> celtypes.Value:
        return self.run(context, _Budget(COST_LIMIT))

    def run(self, context: Context, budget: _Budget) -> celtypes.Value:
        return _Evaluator(ast=self.ast, activation=self.new_activation(), budget=budget).evaluate(context)


_ENVIRONMENT = celpy.Environment(runner_class=_Runner)


class PreparedDevice:
    """The ``device`` variable built once for all expressions evaluated on one device."""

    __slots__ = ("error", "variable")

    def __init__(self, device: CelDevice) -> None:
        self.variable: celtypes.MapType | None = None
        self.error: str | None = None
        try:
            self.variable = device_variable(device)
        except FunctionError as error:
            self.error = str(error)


class CompiledExpression:
    """A selector expression that compiled in the DRA environment; safe to evaluate repeatedly."""

    def __init__(self, expression: str, runner: Any) -> None:
        self.expression = expression
        self._runner = runner

    def evaluate(
        self, device: CelDevice | PreparedDevice | None = None, total: CostBudget | None = None
    ) -> Any:
        """The CEL value for ``device`` (no device: ``device`` reads as a device of driver ""),
        its steps also counted against ``total``."""
        prepared = (
            device if isinstance(device, PreparedDevice) else PreparedDevice(device or CelDevice(driver=""))
        )
        if prepared.error is not None:
            raise CelEvaluationError(self.expression, prepared.error)
        limit = COST_LIMIT if total is None else max(0, min(COST_LIMIT, total.remaining))
        budget = _Budget(limit)
        try:
            return self._runner.run({"device": prepared.variable}, budget)
        except CELEvalError as error:
            raise CelEvaluationError(self.expression, _message(error)) from None
        except _CostExceeded:
            message = COST_MESSAGE if total is None or limit == COST_LIMIT else total.message
            raise CelEvaluationError(self.expression, message) from None
        except RecursionError:
            raise CelEvaluationError(self.expression, "expression nests too deeply to evaluate") from None
        except Exception as error:
            raise CelEvaluationError(self.expression, f"internal evaluation error: {error!r}") from None
        finally:
            if total is not None:
                total.remaining -= limit - max(budget.remaining, 0)

    def matches(self, device: CelDevice | PreparedDevice, total: CostBudget | None = None) -> bool:
        """Whether ``device`` is selected; the result must be a bool, as Kubernetes requires."""
        result = self.evaluate(device, total)
        if not isinstance(result, celtypes.BoolType):
            raise CelEvaluationError(
                self.expression, f"CEL result of type {type_name(result)} could not be converted to bool"
            )
        return bool(result)


def _message(error: CELEvalError) -> str:
    return str(error.args[0]) if error.args else "evaluation failed"


def _compile(expression: str) -> CompiledExpression:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(expression, f"expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    if not expression.strip():
        raise CelCompileError(expression, "expression is empty")
    try:
        ast = _ENVIRONMENT.compile(expression)
        checker.check(ast)
        result_type = checker.static_result_type(ast)
        if result_type is not None:
            raise checker.CheckError(f"must evaluate to bool or the unknown type, not {result_type}")
    except CELParseError as error:
        near = _near(expression, error.line, error.column)
        raise CelCompileError(
            expression, f"syntax error at line {error.line}, column {error.column}{near}"
        ) from None
    except checker.CheckError as error:
        raise CelCompileError(expression, f"compilation failed: {error}") from None
    except RecursionError:
        raise CelCompileError(expression, "expression nests too deeply to compile") from None
    return CompiledExpression(expression, _ENVIRONMENT.program(ast, functions=FUNCTIONS))


def _near(expression: str, line: int | None, column: int | None) -> str:
    if not line or not column:
        return ""
    lines = expression.splitlines() or [""]
    text = lines[line - 1][column - 1 : column + 9] if line <= len(lines) else ""
    return f" near {text!r}" if text else " (unexpected end of expression)"


_cache: collections.OrderedDict[str, CompiledExpression | CelCompileError] = collections.OrderedDict()
_cache_lock = threading.Lock()


def compile_expression(expression: str) -> CompiledExpression:
    """Compile ``expression`` (cached by its text); raises CelCompileError."""
    with _cache_lock:
        cached = _cache.get(expression)
        if cached is not None:
            _cache.move_to_end(expression)
    if cached is None:
        try:
            cached = _compile(expression)
        except CelCompileError as error:
            cached = error
        with _cache_lock:
            _cache[expression] = cached
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    if isinstance(cached, CelCompileError):
        raise CelCompileError(cached.expression, cached.detail)
    return cached
