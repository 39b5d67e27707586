"""CEL language semantics where cel-python and cel-go differ, and what the DRA environment rejects.

Kubernetes runs selectors on cel-go; results here follow cel-go (checked against Kubernetes
v1.37.2): heterogeneous equality, cross-type numeric ordering, checked integer arithmetic, the
error rules of the macros, ``cel.bind``, and compile-time rejection of undeclared names.
"""

from __future__ import annotations

import pytest
from cel_support import fails, rejected, value

from operators.dra.cel import CelCompileError, compile_expression
from operators.dra.cel.program import CACHE_SIZE


@pytest.mark.parametrize(
    "expression",
    [
        "dyn(1) == 1.0",
        "dyn(1) == 1u",
        "dyn(1) != 'a'",  # different types are unequal, not an error
        "dyn(1.5) != 1",
        "dyn([1]) == [1]",
        "dyn({'a': 1}) == {'a': 1}",
        "dyn({'a': 1}) != {'b': 1}",
        "null == null",
        "dyn(null) != 1",
        "dyn(double('NaN')) != dyn(double('NaN'))",
        "1 < 1.5 && 1.5 > 1 && 2 >= 2.0",  # cross-type numeric comparison is enabled in Kubernetes
        "1u < 2 && dyn(-1) < 1u",
        "'a' < 'b' && true > false && b'a' < b'b'",
        "!(9223372036854775807 < 9223372036854775808.0)",  # the int meets the double as a double
        "timestamp('2023-01-01T00:00:00Z') < timestamp('2024-01-01T00:00:00Z')",
        "duration('1h') > duration('30m')",
        "1 in [1, 2] && dyn(1.0) in [1, 2] && 'a' in {'a': 1} && !('b' in {'a': 1})",
        "type(1) == int && type('a') == string && type([]) == list && type(1) == type(2)",
    ],
)
def test_equality_and_ordering(expression: str) -> None:
    assert value(expression)


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("double('NaN') < 1.0", "NaN values cannot be ordered"),
        ("'a' < 1", "found no matching overload for '_<_' applied to '(string, int)'"),
        ("9223372036854775807 + 1 > 0", "integer overflow"),
        ("-9223372036854775808 - 1 < 0", "integer overflow"),
        ("9223372036854775807 * 2 > 0", "integer overflow"),
        ("-9223372036854775808 / -1 > 0", "integer overflow"),
        ("-9223372036854775808 % -1 == 0", "integer overflow"),
        ("0u - 1u > 0u", "unsigned integer overflow"),
        ("7 / 0 == 0", "division by zero"),
        ("7 % 0 == 0", "modulus by zero"),
        ("1 + 1.0 == 2.0", "found no matching overload for '_+_' applied to '(int, double)'"),
        ("[1, 2][2] == 1", "index out of bounds: 2"),
        ("{'a': 1}['b'] == 1", "no such key: b"),
        ("{'a': 1}.b == 1", "no such key: b"),
        ("'x'.a == 1", "type 'string' does not support field selection"),
        ("size(1) == 1", "found no matching overload for 'size' applied to '(int)'"),
        ("!1", "found no matching overload for '!_' applied to '(int)'"),
    ],
)
def test_runtime_errors(expression: str, detail: str) -> None:
    assert fails(expression) == detail


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("7 / 2", 3),
        ("-7 / 2", -3),  # truncated toward zero, as in Go
        ("-7 % 2", -1),
        ("7 % -2", 1),
        ("'a' + 'b'", "ab"),
        ("[1] + [2]", [1, 2]),
        ("7.0 / 0.0 > 1e308", True),
        ("string(1.5) == '1.5' && string(100.0) == '100' && string(1e6) == '1e+06'", True),
        ("string(123456.0) == '123456' && string(0.0001) == '0.0001' && string(0.00001) == '1e-05'", True),
        ("string(true) == 'true' && string(1u) == '1' && string(b'abc') == 'abc'", True),
        ("string(duration('1h30m')) == '5400s'", True),
        ("int('12') == 12 && int(1.9) == 1 && int(-1.9) == -1 && double('1e3') == 1000.0", True),
        ("0x10 == 16 && .5 == 0.5 && '\\u00e9' == 'é' && r'\\d'.size() == 2", True),
        ("2 > 1 ? 'x' : 'y'", "x"),
    ],
)
def test_arithmetic_and_conversions(expression: str, expected: object) -> None:
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("[1, 2, 3].all(x, x > 0)", True),
        ("[1, 2, 3].all(x, x > 1)", False),
        ("[0, 1].exists(x, 1 / x == 1)", True),  # one true settles exists despite an error
        ("[1, 0].all(x, 1 / x > 1)", False),  # one false settles all despite an error
        ("[1, 2].exists_one(x, x > 1)", True),
        ("[1, 2].exists_one(x, x > 0)", False),
        ("[].all(x, x > 0) && ![].exists(x, x > 0) && ![].exists_one(x, x > 0)", True),
        ("[1, 2].map(x, x * 2)", [2, 4]),
        ("[1, 2, 3].map(x, x > 1, x * 10)", [20, 30]),
        ("[1, 2, 3].filter(x, x % 2 == 1)", [1, 3]),
        ("{'a': 1, 'b': 2}.all(k, k.size() == 1)", True),
        ("{'a': 1}.exists(k, k == 'a')", True),
        ("[[1, 2], [3]].map(l, l.map(x, x + 1))", [[2, 3], [4]]),
        ("cel.bind(x, 3, x * x)", 9),
        ("cel.bind(x, 1 / 0, true)", True),  # an unused failing binding does not fail the result
        ("cel.bind(a, 1, cel.bind(b, 2, a + b))", 3),
        ("[1].map(x, cel.bind(y, x + 1, y * y))", [4]),
        ("has({'a': 1}.a) && !has({'a': 1}.b) && has({'a': {'b': 1}}.a.b)", True),
    ],
)
def test_macros(expression: str, expected: object) -> None:
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("[0, 1].all(x, 1 / x > 0)", "division by zero"),
        ("[0, 2].exists(x, 1 / x == 1)", "division by zero"),
        ("[0, 2].exists_one(x, 1 / x == 0)", "division by zero"),
        ("cel.bind(x, 1 / 0, x > 0)", "division by zero"),
        ("[1, 2].all(x, x)", "no such overload: expected bool, got int"),
    ],
)
def test_macro_errors(expression: str, detail: str) -> None:
    assert fails(expression) == detail


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("foo(1)", "undeclared reference to 'foo'"),
        ("x.y", "undeclared reference to 'x'"),
        ("[1].reduce(a, b, 0, a + b)", "undeclared reference to 'reduce'"),  # a cel-python extension
        ("sets.union([1], [2])", "undeclared reference to 'sets.union'"),
        ("quantity('1').sign() == 1", "'sign' is a global function, not a method"),
        ("charAt('a', 1) == 'a'", "'charAt' is a method, not a global function"),
        ("'a'.charAt() == 'a'", "found no matching overload for 'charAt' with 0 argument(s)"),
        ("[1].all(i, v, v > 0)", "two-variable all() comprehensions are not implemented"),
        ("[1].all(1, true)", "all() needs a simple name as its variable"),
        ("has(device)", "invalid argument to has() macro"),
        ("ip('10.0.0.1') == ip('10.0.0.1')", "'ip' is part of the Kubernetes CEL environment"),
        ("device.nope == 1", "undefined field 'nope'"),
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        ("quantity('1')", "must evaluate to bool or the unknown type, not kubernetes.Quantity"),
        ("'true'", "must evaluate to bool or the unknown type, not string"),
        ("Foo{a: 1}", "message construction is not available"),
        ("", "expression is empty"),
        ("(1 +", "syntax error at line 1, column 4"),
        ("1 +* 2", "syntax error at line 1, column 4 near '* 2'"),
        ("'x' == " + "'y' + " * 2100 + "'z'", "longer than 10240 characters"),
    ],
)
def test_compile_errors(expression: str, detail: str) -> None:
    assert detail in rejected(expression)


def test_macro_variables_are_scoped_and_may_shadow_device() -> None:
    assert value("[1].all(device, device == 1)")
    assert detail_of("[1].all(x, x == 1) && x == 1") == "undeclared reference to 'x'"


def detail_of(expression: str) -> str:
    return rejected(expression).removeprefix("compilation failed: ")


def test_compiled_expressions_are_cached_by_text() -> None:
    first = compile_expression("device.driver == 'cached.example.com'")
    assert compile_expression("device.driver == 'cached.example.com'") is first
    assert compile_expression("device.driver == 'other.example.com'") is not first
    # Failures are cached too, and raised afresh each time.
    for _ in range(2):
        with pytest.raises(CelCompileError):
            compile_expression("cached_failure(")
    # The cache is bounded: old entries make room for new ones.
    for index in range(CACHE_SIZE + 1):
        compile_expression(f"device.driver == 'filler-{index}'")
    assert compile_expression("device.driver == 'cached.example.com'") is not first
