"""JSON as kube-apiserver writes it, so that what the operators send back is what they read.

kube-apiserver keeps a ``runtime.RawExtension`` (a claim's opaque device parameters, a device
status's ``data``) as the exact bytes it was given, and compares those bytes when it validates
an update: a claim's ``spec`` is immutable and its ``status.allocation`` may be cleared but not
changed. A full-object write of a claim therefore has to reproduce the bytes the server
returned, byte for byte. Go clients do so by sending protobuf; a JSON client only does if it
writes JSON the way Go's ``encoding/json`` does. Python's defaults do not: they put a space
after ``,`` and ``:``, escape every non-ASCII character and reprint floating-point numbers
their own way, so ``{"a":"b"}`` went back as ``{"a": "b"}`` and the server refused to remove
a finalizer from any claim a Go client had created ("spec: Invalid value: null: field is
immutable").

:func:`dumps` writes compact JSON, keeps non-ASCII characters as they are and escapes ``<``,
``>``, ``&``, U+2028 and U+2029 as Go does (strings are the only place JSON can hold them, so
the text is escaped as a whole). A lone surrogate, which only an escape in JSON read from
elsewhere can produce (a tenant's ``"\\ud800"`` in opaque parameters, a webhook's message), is
written as that escape again: UTF-8 cannot encode it, and the request carrying it could not be
sent at all. :func:`loads` keeps the literal of every floating-point
number whose Python spelling differs (``1.50``, ``1e5``, ``1e-7``), and :func:`dumps` writes
that literal back. Integers keep their digits anyway. Escapes that Go would not write
(``\\u0041`` for ``A``) cannot be reproduced; Go clients never write them.

:func:`loads_strict` reads JSON from a third party that is to be written on to kube-apiserver,
and refuses what :func:`dumps` could not write.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

DEEPEST = 10_000
"""The deepest nesting kube-apiserver reads (sigs.k8s.io/json); a RawExtension of 10 KiB that a
tenant writes (a claim's opaque parameters) nests about 5 100 levels."""

# Surrogates too: Python keeps a lone one that an escape in the JSON read named ("\\ud800"), and
# UTF-8 cannot carry it. Written back as the same escape, the bytes are those the server holds.
_GO_ESCAPED = re.compile("[<>&\u2028\u2029\ud800-\udfff]")
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_PLACEHOLDER = re.compile('"\\\\u0000literal:([0-9]+)"')


class LiteralFloat(float):
    """A number read from JSON whose literal Python would not print the same way; everything
    but :func:`dumps` sees the float."""

    __slots__ = ("literal",)
    literal: str

    def __new__(cls, literal: str) -> LiteralFloat:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number


class _Seen:
    """Whether this process has read a :class:`LiteralFloat`. Until it has (on most clusters,
    never), nothing can hold one and :func:`dumps` takes the C encoder's path alone."""

    literal_floats = False


def _parse_float(literal: str) -> float:
    number = float(literal)
    if repr(number) == literal:
        return number
    _Seen.literal_floats = True
    return LiteralFloat(literal)


class TooDeep(ValueError):
    """JSON nested deeper than this Python reads or writes (see :func:`read_what_the_server_reads`)."""


def read_what_the_server_reads() -> None:
    """Let this process read and write JSON as deep as kube-apiserver accepts. Python's JSON
    scanner and encoder recurse once a level and stop at the recursion limit (1 000 by default):
    one claim nested deeper by a tenant made every list and watch of claims fail. Called once by
    each program's entry point. Python 3.12 caps the C recursion of the scanner at its own limit
    whatever this says; there a deeper object is refused as :class:`TooDeep`."""
    # Two frames a level: writing back a value that holds a LiteralFloat walks it in Python, a
    # frame for the node and one for its comprehension. The rest is for the frames below the
    # first level (the event loop, the callbacks). Python 3.11 runs Python frames off the C stack,
    # and the C scanner's 10 000 levels fit the main thread's.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2 * DEEPEST + 500))


def loads(data: str | bytes | bytearray) -> Any:
    """Parse JSON from kube-apiserver, keeping what :func:`dumps` needs to write it back."""
    try:
        return json.loads(data, parse_float=_parse_float)
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than this process reads ({sys.getrecursionlimit()})") from None


class NotJSONNumber(ValueError):
    """A number Python reads but RFC 8259 has no spelling for (see :func:`loads_strict`)."""


def _refuse_constant(name: str) -> Any:
    raise NotJSONNumber(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if math.isinf(number):
        raise NotJSONNumber(f"{literal} is out of the range of a 64-bit float")
    return number


def _float64_integer(literal: str) -> int:
    # kube-apiserver checks a RawExtension (a device status's data) by reading it into Go's any,
    # where every number is a float64: an integer beyond its range is a 422 there.
    _finite_float(literal)
    return int(literal)


def loads_strict(data: str | bytes | bytearray) -> Any:
    """Parse JSON from a third party (an action's response) that may be written on to kube-apiserver.
    Python reads ``NaN``, ``Infinity`` and ``-Infinity``, and reads a number too large for a 64-bit
    float (``1e400``) as infinity; RFC 8259 and Go have none of these, so :func:`dumps` refuses them
    and a write carrying one could never be sent. An integer of that size (400 digits) Python reads
    exactly, and kube-apiserver refuses it. Here each is a :class:`ValueError` at once, as other
    malformed JSON is. Floats are read as plain floats: no server holds these bytes, so there is no
    literal to write back, and keeping one would put every later :func:`dumps` on its slow path."""
    try:
        return json.loads(
            data, parse_float=_finite_float, parse_int=_float64_integer, parse_constant=_refuse_constant
        )
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than this process reads ({sys.getrecursionlimit()})") from None


def dumps(value: Any) -> str:
    """``value`` as Go's ``encoding/json`` writes it (see the module docstring)."""
    try:
        text = _with_literals(value) if _Seen.literal_floats else _COMPACT.encode(value)
    except RecursionError:
        raise TooDeep(f"a value nested deeper than this process writes ({sys.getrecursionlimit()})") from None
    if _GO_ESCAPED.search(text) is None:
        return text
    return _GO_ESCAPED.sub(_go_escape, text)


def _go_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _with_literals(value: Any) -> str:
    """The C encoder prints floats itself, so each :class:`LiteralFloat` is swapped for a
    placeholder string (which JSON text cannot otherwise contain: it starts with an escaped
    NUL) and its literal put in the placeholder's place afterwards."""
    literals: list[str] = []

    def swap(node: Any) -> Any:
        if isinstance(node, LiteralFloat):
            literals.append(node.literal)
            return f"\x00literal:{len(literals) - 1}"
        if isinstance(node, dict):
            return {key: swap(item) for key, item in node.items()}
        if isinstance(node, (list, tuple)):
            return [swap(item) for item in node]
        return node

    text = _COMPACT.encode(swap(value))
    if not literals:
        return text
    return _PLACEHOLDER.sub(lambda match: literals[int(match.group(1))], text)
