"""cel-go's string extension library at version 2, the version Kubernetes 1.29+ enables.

Functions: ``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``,
``split``, ``substring``, ``trim``, ``join``, ``format`` and ``strings.quote``. Version 3 added
``reverse`` for strings; Kubernetes does not enable it, so ``'abc'.reverse()`` is an error (the list
``reverse`` of the list library is another function).

Indices count code points, as Go counts runes. ``trim`` removes what Go's ``unicode.IsSpace``
calls space, which is not Python's ``str.isspace``. ``format`` follows the version-2 formatter with
cel-go's default ``en_US`` locale: ``%s %d %f %b %x %X %o`` and ``%%``; ``%f`` groups thousands
with commas as that locale does. ``%e`` prints a locale-specific superscript form that this module
does not reproduce; it fails with a clear error instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

from celpy import celtypes

from .errors import FunctionError, cel_function, no_overload
from .values import go_format_double, type_name

__all__ = ["FUNCTIONS", "STRING_METHODS"]

# unicode.IsSpace: Latin-1 spaces plus the other characters with the White_Space property.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def _is_int(value: Any) -> bool:
    return isinstance(value, celtypes.IntType) and not isinstance(value, celtypes.BoolType)


def _check(function: str, receiver: Any, args: tuple[Any, ...], kinds: str) -> None:
    """``kinds`` spells the expected argument types: s = string, i = int."""
    expected = {"s": lambda v: isinstance(v, str), "i": _is_int}
    if not isinstance(receiver, str) or len(args) != len(kinds):
        raise no_overload(function, receiver, *args)
    if not all(expected[kind](arg) for kind, arg in zip(kinds, args, strict=True)):
        raise no_overload(function, receiver, *args)


def char_at(text: Any, index: Any) -> celtypes.StringType:
    _check("charAt", text, (index,), "i")
    if index < 0 or index > len(text):
        raise FunctionError(f"index out of range: {index}")
    return celtypes.StringType(text[index] if index < len(text) else "")


def _without_search(text: str, needle: str, offset: int) -> celtypes.IntType | None:
    """The answer of ``indexOf`` and ``lastIndexOf`` where no search is needed (an empty needle, an
    offset past the text), or None; a negative offset is an error for both."""
    if offset < 0:
        raise FunctionError(f"index out of range: {offset}")
    if not needle:
        return celtypes.IntType(min(offset, len(text)))
    if offset >= len(text):
        return celtypes.IntType(-1)
    return None


def string_index_of(text: Any, *args: Any) -> celtypes.IntType:
    _check("indexOf", text, args, "si"[: max(len(args), 1)])
    needle, offset = str(args[0]), int(args[1]) if len(args) > 1 else 0
    if (answer := _without_search(text, needle, offset)) is not None:
        return answer
    return celtypes.IntType(text.find(needle, offset))


def string_last_index_of(text: Any, *args: Any) -> celtypes.IntType:
    _check("lastIndexOf", text, args, "si"[: max(len(args), 1)])
    needle = str(args[0])
    offset = int(args[1]) if len(args) > 1 else len(text) - 1
    if len(args) == 1:
        if not needle:
            return celtypes.IntType(len(text))
        if len(text) < len(needle):
            return celtypes.IntType(-1)
    if (answer := _without_search(text, needle, offset)) is not None:
        return answer
    # The offset is the last position where a match may *start*.
    return celtypes.IntType(text.rfind(needle, 0, offset + len(needle)))


def _map_ascii(text: str, convert: Any) -> str:
    return "".join(convert(char) if char.isascii() else char for char in text)


def lower_ascii(text: Any) -> celtypes.StringType:
    _check("lowerAscii", text, (), "")
    return celtypes.StringType(_map_ascii(text, str.lower))


def upper_ascii(text: Any) -> celtypes.StringType:
    _check("upperAscii", text, (), "")
    return celtypes.StringType(_map_ascii(text, str.upper))


def replace(text: Any, *args: Any) -> celtypes.StringType:
    _check("replace", text, args, "ssi"[: max(len(args), 2)])
    limit = int(args[2]) if len(args) > 2 else -1
    # str.replace matches Go's strings.Replace, including an empty pattern and a negative limit.
    return celtypes.StringType(text.replace(str(args[0]), str(args[1]), limit))


def split(text: Any, *args: Any) -> celtypes.ListType:
    _check("split", text, args, "si"[: max(len(args), 1)])
    separator, limit = str(args[0]), int(args[1]) if len(args) > 1 else -1
    if limit == 0:
        return celtypes.ListType()
    if separator:
        parts = text.split(separator, limit - 1 if limit > 0 else -1)
    else:
        # Go explodes the string into characters, the last part keeping the rest.
        chars = list(text)
        parts = (
            chars if limit < 0 or limit >= len(chars) else [*chars[: limit - 1], "".join(chars[limit - 1 :])]
        )
    return celtypes.ListType(celtypes.StringType(part) for part in parts)


def substring(text: Any, *args: Any) -> celtypes.StringType:
    _check("substring", text, args, "ii"[: max(len(args), 1)])
    start = int(args[0])
    if len(args) == 1:
        if start < 0 or start > len(text):
            raise FunctionError(f"index out of range: {start}")
        return celtypes.StringType(text[start:])
    end = int(args[1])
    if start > end:
        raise FunctionError(f"invalid substring range. start: {start}, end: {end}")
    for index in (start, end):
        if index < 0 or index > len(text):
            raise FunctionError(f"index out of range: {index}")
    return celtypes.StringType(text[start:end])


def trim(text: Any) -> celtypes.StringType:
    _check("trim", text, (), "")
    return celtypes.StringType(text.strip(_GO_SPACE))


def join(items: Any, *args: Any) -> celtypes.StringType:
    if not isinstance(items, celtypes.ListType) or len(args) > 1 or not all(isinstance(a, str) for a in args):
        raise no_overload("join", items, *args)
    for item in items:
        if not isinstance(item, str):
            raise FunctionError(f"join: invalid input: {_plain(item)}")
    return celtypes.StringType((args[0] if args else "").join(cast(list[str], items)))


_QUOTED = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
_QUOTED |= {"\\": "\\\\", '"': '\\"'}


@cel_function
def quote(text: Any) -> celtypes.StringType:
    if not isinstance(text, str):
        raise no_overload("strings.quote", text)
    # Lone surrogates are the only invalid code points a Python string can hold; Go writes U+FFFD.
    body = "".join(_QUOTED.get(char, "\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char) for char in text)
    return celtypes.StringType(f'"{body}"')


def _plain(value: Any) -> str:
    """How Go's %v shows a CEL value inside an error message."""
    if isinstance(value, celtypes.BoolType):
        return "true" if value else "false"
    if isinstance(value, celtypes.DoubleType):
        return go_format_double(float(value))
    return str(value)


def _format_string(value: Any, nested: bool = False) -> str:
    """The ``%s`` clause; inside a list or map, strings are quoted and doubles get six decimals."""
    if value is None:
        return "null"
    if isinstance(value, celtypes.BoolType):
        return "true" if value else "false"
    if isinstance(value, celtypes.DoubleType):
        number = float(value)
        if nested:
            text = "NaN" if math.isnan(number) else _signed_infinity(number) or f"{number:.6f}"
            return f'"{text}"' if not math.isfinite(number) else text
        return go_format_double(number)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return str(int(value))
    if isinstance(value, str):
        return _go_quote(value) if nested else str(value)
    if isinstance(value, celtypes.ListType):
        return "[" + ", ".join(_format_string(item, True) for item in value) + "]"
    if isinstance(value, celtypes.MapType):
        pairs = sorted((_format_string(key, True), _format_string(item, True)) for key, item in value.items())
        return "{" + ", ".join(f"{key}:{item}" for key, item in pairs) + "}"
    raise FunctionError(
        f"error during formatting: string clause can only be used on strings, not {type_name(value)}"
    )


def _signed_infinity(number: float) -> str:
    return "" if math.isfinite(number) else ("+Inf" if number > 0 else "-Inf")


def _go_quote(text: str) -> str:
    # Go's %q: backslash escapes for quotes, backslashes and control characters.
    escaped = "".join(_QUOTED.get(char, f"\\x{ord(char):02x}" if ord(char) < 0x20 else char) for char in text)
    return f'"{escaped}"'


def _format_fixed(value: Any, precision: int) -> str:
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        value = celtypes.DoubleType(value.replace("Infinity", "inf"))
    if not isinstance(value, celtypes.DoubleType):
        raise FunctionError(
            "error during formatting: fixed-point clause can only be used on doubles, was given "
            + type_name(value)
        )
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    return f"{number:,.{precision}f}"


def _format_integer(value: Any, clause: str) -> str:
    if clause == "b" and isinstance(value, celtypes.BoolType):
        return "1" if value else "0"
    if clause in "xX" and isinstance(value, (str, bytes)):
        data = value.encode() if isinstance(value, str) else bytes(value)
        text = data.hex()
        return text.upper() if clause == "X" else text
    if not isinstance(value, (celtypes.IntType, celtypes.UintType)) or isinstance(value, celtypes.BoolType):
        names = {"d": "decimal", "b": "binary", "x": "hex", "X": "hex", "o": "octal"}
        raise FunctionError(
            f"error during formatting: {names[clause]} clause can only be used on integers, was given "
            f"{type_name(value)}"
        )
    return format(int(value), "d" if clause == "d" else clause)


def string_format(template: Any, args: Any) -> celtypes.StringType:
    if not isinstance(template, str) or not isinstance(args, celtypes.ListType):
        raise no_overload("format", template, args)
    out: list[str] = []
    position, used = 0, 0
    while position < len(template):
        char = template[position]
        if char != "%":
            out.append(char)
            position += 1
            continue
        if template[position + 1 : position + 2] == "%":
            out.append("%")
            position += 2
            continue
        if used >= len(args):
            raise FunctionError(f"index {used} out of range")
        position += 1
        precision = 6
        if template[position : position + 1] == ".":
            start = position = position + 1
            while position < len(template) and template[position].isascii() and template[position].isdigit():
                position += 1
            if position >= len(template):
                raise FunctionError(
                    "could not parse formatting clause: could not find end of precision specifier"
                )
            precision = int(template[start:position] or "0")
        if position >= len(template):
            raise FunctionError("unexpected end of string")
        clause = template[position]
        position += 1
        value = args[used]
        used += 1
        if clause == "s":
            out.append(_format_string(value))
        elif clause == "f":
            out.append(_format_fixed(value, precision))
        elif clause in "dbxXo":
            out.append(_format_integer(value, clause))
        elif clause == "e":
            raise FunctionError("the %e formatting clause is not supported by dra-operators")
        else:
            raise FunctionError(
                f'could not parse formatting clause: unrecognized formatting clause "{clause}"'
            )
    return celtypes.StringType("".join(out))


# Receiver-style functions on strings; program.py dispatches names shared with lists on the receiver.
STRING_METHODS: dict[str, Callable[..., Any]] = {
    "charAt": char_at,
    "indexOf": string_index_of,
    "lastIndexOf": string_last_index_of,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "format": string_format,
}

FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: cel_function(function) for name, function in STRING_METHODS.items()
} | {
    "join": cel_function(join),
    "strings.quote": quote,
}
