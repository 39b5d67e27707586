"""The Kubernetes semver library of CEL: ``semver()``, ``isSemver()`` and the Semver methods.

Kubernetes parses with github.com/blang/semver/v4, which is stricter than some readings of
semver.org (no leading ``v``, exactly three numeric parts, no leading zeros) and compares build
metadata never. Its rules and error messages are reproduced here, because a version attribute that
blang rejects makes the whole device unusable for every CEL selector, not only for expressions that
read that attribute.

The optional second argument, ``normalize``, accepts a leading ``v``, fills in missing minor and
patch numbers and drops leading zeros first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celpy import celtypes

from .errors import FunctionError, cel_function, no_overload, ordering_functions

__all__ = ["FUNCTIONS", "CelSemver", "parse_semver"]

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789")
_UINT64_MAX = 2**64 - 1


@dataclass(frozen=True)
class _PreRelease:
    number: int | None
    text: str

    def compare(self, other: _PreRelease) -> int:
        # Numeric identifiers sort before alphanumeric ones.
        if self.number is not None and other.number is not None:
            return (self.number > other.number) - (self.number < other.number)
        if self.number is not None:
            return -1
        if other.number is not None:
            return 1
        return (self.text > other.text) - (self.text < other.text)


@dataclass(frozen=True)
class CelSemver:
    """A CEL value of type ``kubernetes.Semver``."""

    major: int
    minor: int
    patch: int
    pre: tuple[_PreRelease, ...] = ()
    build: tuple[str, ...] = ()

    def compare(self, other: CelSemver) -> int:
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return 1 if mine > theirs else -1
        # A release sorts after its pre-releases; build metadata never counts.
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for left, right in zip(self.pre, other.pre, strict=False):
            result = left.compare(right)
            if result:
                return result
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))


def _quote(text: str) -> str:
    """Go's %q, for the ASCII-or-printable text a version string is made of."""
    return json.dumps(text, ensure_ascii=False)


def _number(part: str, what: str) -> int:
    if not set(part) <= _NUMBERS:
        raise FunctionError(f"Invalid character(s) found in {what} number {_quote(part)}")
    if len(part) > 1 and part[0] == "0":
        raise FunctionError(f"{what.capitalize()} number must not contain leading zeroes {_quote(part)}")
    if not part or int(part) > _UINT64_MAX:
        raise FunctionError(f"strconv.ParseUint: parsing {_quote(part)}: invalid syntax or out of range")
    return int(part)


def _pre_release(part: str) -> _PreRelease:
    if not part:
        raise FunctionError("Prerelease is empty")
    if set(part) <= _NUMBERS:
        if len(part) > 1 and part[0] == "0":
            raise FunctionError(f"Numeric PreRelease version must not contain leading zeroes {_quote(part)}")
        if int(part) > _UINT64_MAX:
            raise FunctionError(f"strconv.ParseUint: parsing {_quote(part)}: value out of range")
        return _PreRelease(int(part), "")
    if not set(part) <= _ALPHANUM:
        raise FunctionError(f"Invalid character(s) found in prerelease {_quote(part)}")
    return _PreRelease(None, part)


def parse_semver(text: str) -> CelSemver:
    """blang/semver ``Parse``; raises FunctionError with its message."""
    if not text:
        raise FunctionError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise FunctionError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    rest = parts[2]
    build: list[str] = []
    pre: list[_PreRelease] = []
    if "+" in rest:
        rest, build_text = rest.split("+", 1)
        build = build_text.split(".")
    if "-" in rest:
        rest, pre_text = rest.split("-", 1)
        pre = [_pre_release(part) for part in pre_text.split(".")]
    patch = _number(rest, "patch")
    for part in build:
        if not part:
            raise FunctionError("Build meta data is empty")
        if not set(part) <= _ALPHANUM:
            raise FunctionError(f"Invalid character(s) found in build meta data {_quote(part)}")
    return CelSemver(major, minor, patch, tuple(pre), tuple(build))


def _normalize_and_parse(text: str) -> CelSemver:
    """The ``normalize`` variant: like blang's ParseTolerant, but without trimming whitespace."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or stripped[0] not in _NUMBERS:
                stripped = "0" + stripped
            parts[index] = stripped
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise FunctionError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def _arguments(function: str, text: Any, rest: tuple[Any, ...]) -> tuple[str, bool]:
    """The text and the optional ``normalize`` flag, both type-checked."""
    if not isinstance(text, str) or len(rest) > 1 or not all(isinstance(v, celtypes.BoolType) for v in rest):
        raise no_overload(function, text, *rest)
    return str(text), bool(rest[0]) if rest else False


@cel_function
def semver(text: Any, *rest: Any) -> CelSemver:
    value, tolerant = _arguments("semver", text, rest)
    return _normalize_and_parse(value) if tolerant else parse_semver(value)


@cel_function
def is_semver(text: Any, *rest: Any) -> celtypes.BoolType:
    value, tolerant = _arguments("isSemver", text, rest)
    try:
        _normalize_and_parse(value) if tolerant else parse_semver(value)
    except FunctionError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _int64(number: int) -> celtypes.IntType:
    # Go converts the uint64 component with int64(...), which wraps above 2**63 - 1.
    return celtypes.IntType((number + 2**63) % 2**64 - 2**63)


def _version(function: str, value: Any) -> CelSemver:
    if not isinstance(value, CelSemver):
        raise no_overload(function, value)
    return value


@cel_function
def major(value: Any) -> celtypes.IntType:
    return _int64(_version("major", value).major)


@cel_function
def minor(value: Any) -> celtypes.IntType:
    return _int64(_version("minor", value).minor)


@cel_function
def patch(value: Any) -> celtypes.IntType:
    return _int64(_version("patch", value).patch)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "semver": semver,
    "isSemver": is_semver,
    "major": major,
    "minor": minor,
    "patch": patch,
    **ordering_functions(CelSemver),
}
