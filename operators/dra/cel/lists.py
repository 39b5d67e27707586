"""List functions of the Kubernetes CEL environment: three libraries, as Kubernetes 1.37 layers them.

* cel-go's list extension at version 3: ``slice``, ``flatten``, ``sort``, ``sortBy`` (a macro, see
  program.py; :func:`sort_by_keys` does its sorting), ``reverse``, ``distinct`` and ``lists.range``;
* Kubernetes' own list library at version 1: ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``,
  ``lastIndexOf`` and ``includes`` (``includes`` also compares a scalar with a scalar, so that one
  expression works for single-valued and list-typed attributes);
* cel-go's set extension: ``sets.contains``, ``sets.equivalent`` and ``sets.intersects``.

Membership and equality are CEL's heterogeneous equality (values.py), so ``[1, 'a'].indexOf('a')``
is 1 and never an error.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any, cast

from celpy import celtypes

from .errors import FunctionError, cel_function, no_overload
from .values import compare, equals, type_name

__all__ = ["FUNCTIONS", "LIST_METHODS", "sort_by_keys"]

MAX_RANGE = 1_000_000
_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_COMPARABLE = {"int", "uint", "double", "bool", "google.protobuf.Duration", "google.protobuf.Timestamp"}
_COMPARABLE |= {"string", "bytes"}


def _list(function: str, value: Any, *args: Any) -> list[Any]:
    if not isinstance(value, celtypes.ListType):
        raise no_overload(function, value, *args)
    return cast(list[Any], value)


def _int(function: str, value: Any, *args: Any) -> int:
    if not isinstance(value, celtypes.IntType) or isinstance(value, celtypes.BoolType):
        raise no_overload(function, *args, value)
    return int(value)


def _equal(left: Any, right: Any) -> bool:
    try:
        return equals(left, right)
    except FunctionError:
        return False


def list_slice(items: Any, start: Any, end: Any) -> celtypes.ListType:
    values = _list("slice", items, start, end)
    first, last = _int("slice", start, items), _int("slice", end, items, start)
    if first < 0 or last < 0:
        raise FunctionError(f"cannot slice({first}, {last}), negative indexes not supported")
    if first > last:
        raise FunctionError(
            f"cannot slice({first}, {last}), start index must be less than or equal to end index"
        )
    if len(values) < last:
        raise FunctionError(f"cannot slice({first}, {last}), list is length {len(values)}")
    return celtypes.ListType(values[first:last])


def _flatten(values: list[Any], depth: int) -> list[Any]:
    flat: list[Any] = []
    for value in values:
        if isinstance(value, celtypes.ListType) and depth > 0:
            flat.extend(_flatten(cast(list[Any], value), depth - 1))
        else:
            flat.append(value)
    return flat


def flatten(items: Any, *args: Any) -> celtypes.ListType:
    values = _list("flatten", items, *args)
    if len(args) > 1:
        raise no_overload("flatten", items, *args)
    depth = _int("flatten", args[0], items) if args else 1
    if depth < 0:
        raise FunctionError("level must be non-negative")
    return celtypes.ListType(_flatten(values, depth))


def sort_by_keys(items: Any, keys: list[Any]) -> celtypes.ListType:
    """Order ``items`` by their ``keys``; the keys must share one comparable type."""
    values = _list("sort", items)
    if not values:
        return celtypes.ListType(values)
    kind = type_name(keys[0])
    if kind not in _COMPARABLE:
        raise FunctionError("list elements must be comparable")
    if any(type_name(key) != kind for key in keys):
        raise FunctionError("list elements must have the same type")

    def less(left: Any, right: Any) -> bool:
        try:
            return compare(left, right) < 0
        except FunctionError:
            # Go's sort asks only "is it less?", and an error (NaN) answers no.
            return False

    def order(left: int, right: int) -> int:
        return -1 if less(keys[left], keys[right]) else 1 if less(keys[right], keys[left]) else 0

    indices = sorted(range(len(values)), key=functools.cmp_to_key(order))
    return celtypes.ListType(values[index] for index in indices)


def sort(items: Any) -> celtypes.ListType:
    values = _list("sort", items)
    return sort_by_keys(values, list(values))


def reverse(items: Any) -> celtypes.ListType:
    return celtypes.ListType(reversed(_list("reverse", items)))


def distinct(items: Any) -> celtypes.ListType:
    unique: list[Any] = []
    for value in _list("distinct", items):
        if not any(_equal(value, seen) for seen in unique):
            unique.append(value)
    return celtypes.ListType(unique)


@cel_function
def lists_range(size: Any) -> celtypes.ListType:
    count = _int("lists.range", size)
    if count < 0:
        raise FunctionError(f"lists.range: size must be non-negative, got {count}")
    if count > MAX_RANGE:
        raise FunctionError(f"lists.range: size {count} exceeds maximum allowed ({MAX_RANGE})")
    return celtypes.ListType(celtypes.IntType(i) for i in range(count))


def _comparable(function: str, value: Any) -> Any:
    if type_name(value) not in _COMPARABLE:
        raise no_overload(function, value)
    return value


def is_sorted(items: Any) -> celtypes.BoolType:
    values = _list("isSorted", items)
    for previous, current in itertools.pairwise(values):
        _comparable("isSorted", previous)
        _comparable("isSorted", current)
        try:
            if compare(previous, current) > 0:
                return celtypes.BoolType(False)
        except FunctionError:
            # Kubernetes only looks for "greater"; a failed comparison is not that.
            continue
    return celtypes.BoolType(True)


def _extreme(function: str, prefer: Callable[[int], bool]) -> Callable[[Any], Any]:
    def pick(items: Any) -> Any:
        values = _list(function, items)
        if not values:
            raise FunctionError(f"{function} called on empty list")
        result = _comparable(function, values[0])
        for value in values[1:]:
            if prefer(compare(result, _comparable(function, value), function)):
                result = value
        return result

    return pick


def list_sum(items: Any) -> Any:
    values = _list("sum", items)
    if not values:
        return celtypes.IntType(0)
    kind = type_name(values[0])
    if any(type_name(value) != kind for value in values):
        raise no_overload("sum", items)
    if kind in ("int", "uint"):
        total = sum(int(value) for value in values)
        low, high = _INT64 if kind == "int" else _UINT64
        if not low <= total <= high:
            raise FunctionError("integer overflow" if kind == "int" else "unsigned integer overflow")
        return celtypes.IntType(total) if kind == "int" else celtypes.UintType(total)
    if kind == "double":
        return celtypes.DoubleType(sum(float(value) for value in values))
    if kind == "google.protobuf.Duration":
        total_duration: Any = values[0]
        for value in values[1:]:
            total_duration = total_duration + value
        return total_duration
    raise no_overload("sum", items)


def list_index_of(items: Any, item: Any) -> celtypes.IntType:
    values = _list("indexOf", items, item)
    return celtypes.IntType(next((i for i, value in enumerate(values) if _equal(value, item)), -1))


def list_last_index_of(items: Any, item: Any) -> celtypes.IntType:
    values = _list("lastIndexOf", items, item)
    found = (i for i in range(len(values) - 1, -1, -1) if _equal(values[i], item))
    return celtypes.IntType(next(found, -1))


@cel_function
def includes(target: Any, item: Any) -> celtypes.BoolType:
    if isinstance(target, celtypes.ListType):
        return celtypes.BoolType(any(_equal(value, item) for value in target))
    return celtypes.BoolType(_equal(target, item))


def _set_contains(values: list[Any], subset: list[Any]) -> bool:
    return all(any(_equal(value, element) for value in values) for element in subset)


@cel_function
def sets_contains(items: Any, subset: Any) -> celtypes.BoolType:
    return celtypes.BoolType(
        _set_contains(_list("sets.contains", items, subset), _list("sets.contains", subset))
    )


@cel_function
def sets_equivalent(left: Any, right: Any) -> celtypes.BoolType:
    first, second = _list("sets.equivalent", left, right), _list("sets.equivalent", right)
    return celtypes.BoolType(_set_contains(first, second) and _set_contains(second, first))


@cel_function
def sets_intersects(left: Any, right: Any) -> celtypes.BoolType:
    first, second = _list("sets.intersects", left, right), _list("sets.intersects", right)
    return celtypes.BoolType(any(_equal(a, b) for a in first for b in second))


# Receiver-style functions on lists; program.py dispatches names shared with strings on the receiver.
LIST_METHODS: dict[str, Callable[..., Any]] = {
    "slice": list_slice,
    "flatten": flatten,
    "sort": sort,
    "reverse": reverse,
    "distinct": distinct,
    "isSorted": is_sorted,
    "sum": list_sum,
    "min": _extreme("min", lambda result: result > 0),
    "max": _extreme("max", lambda result: result < 0),
    "indexOf": list_index_of,
    "lastIndexOf": list_last_index_of,
}

FUNCTIONS: dict[str, Callable[..., Any]] = {name: cel_function(fn) for name, fn in LIST_METHODS.items()} | {
    "includes": includes,
    "lists.range": lists_range,
    "sets.contains": sets_contains,
    "sets.equivalent": sets_equivalent,
    "sets.intersects": sets_intersects,
}
