"""cel-go's string extension, version 2, as Kubernetes enables it for DRA selectors.

The examples are those of the library's documentation plus its edge cases; every result and error
was checked against Kubernetes v1.37.2's CEL environment.
"""

from __future__ import annotations

import pytest
from cel_support import fails, value


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("'hello'.charAt(4)", "o"),
        ("'hello'.charAt(5)", ""),
        ("'héllo'.charAt(1)", "é"),  # code points, like Go's runes
        ("'hello mellow'.indexOf('')", 0),
        ("'hello mellow'.indexOf('ello')", 1),
        ("'hello mellow'.indexOf('jello')", -1),
        ("'hello mellow'.indexOf('', 2)", 2),
        ("'hello mellow'.indexOf('ello', 2)", 7),
        ("'hello mellow'.indexOf('ello', 20)", -1),
        ("'hello mellow'.indexOf('', 20)", 12),
        ("'hello mellow'.lastIndexOf('')", 12),
        ("'hello mellow'.lastIndexOf('ello')", 7),
        ("'hello mellow'.lastIndexOf('jello')", -1),
        ("'hello mellow'.lastIndexOf('ello', 6)", 1),
        ("'hello mellow'.lastIndexOf('ello', 20)", -1),
        ("'hello mellow'.lastIndexOf('', 3)", 3),
        ("''.lastIndexOf('a')", -1),
        ("'ab'.lastIndexOf('abc')", -1),
        ("'TacoCat'.lowerAscii()", "tacocat"),
        ("'TacoCÆt Xii'.lowerAscii()", "tacocÆt xii"),
        ("'TacoCÆt Xii'.upperAscii()", "TACOCÆT XII"),
        ("'hello hello'.replace('he', 'we')", "wello wello"),
        ("'hello hello'.replace('he', 'we', -1)", "wello wello"),
        ("'hello hello'.replace('he', 'we', 1)", "wello hello"),
        ("'hello hello'.replace('he', 'we', 0)", "hello hello"),
        ("'hello hello'.replace('', '_')", "_h_e_l_l_o_ _h_e_l_l_o_"),
        ("'hello hello'.replace('', '_', 2)", "_h_ello hello"),
        ("'hello hello'.replace('h', '')", "ello ello"),
        ("'hello hello hello'.split(' ')", ["hello", "hello", "hello"]),
        ("'hello hello hello'.split(' ', 0)", []),
        ("'hello hello hello'.split(' ', 1)", ["hello hello hello"]),
        ("'hello hello hello'.split(' ', 2)", ["hello", "hello hello"]),
        ("'hello hello hello'.split(' ', -1)", ["hello", "hello", "hello"]),
        ("'abc'.split('')", ["a", "b", "c"]),
        ("'abc'.split('', 2)", ["a", "bc"]),
        ("''.split('')", []),
        ("''.split(',')", [""]),
        ("'tacocat'.substring(4)", "cat"),
        ("'tacocat'.substring(0, 4)", "taco"),
        ("'tacocat'.substring(7)", ""),
        ("'  \\ttrim\\n    '.trim()", "trim"),
        ("'\\u00a0x\\u0085'.trim()", "x"),  # Go's unicode.IsSpace
        ("'\\u001cx'.trim()", "\x1cx"),  # ...which, unlike str.isspace, excludes U+001C
        ("['hello', 'mellow'].join()", "hellomellow"),
        ("['hello', 'mellow'].join(' ')", "hello mellow"),
        ("[].join()", ""),
        ("[].join('/')", ""),
        ("strings.quote('single-quote with \"double quote\"')", '"single-quote with \\"double quote\\""'),
        ('strings.quote("two escape sequences \\a\\n")', '"two escape sequences \\a\\n"'),
        ("'abc'.contains('b') && 'abc'.startsWith('ab') && 'abc'.endsWith('bc')", True),
        ("'abc'.matches('^a.c$') && matches('abc', 'b') && !'abc'.matches('^b')", True),
        ("size('héllo') == 5 && 'abc'.size() == 3", True),
    ],
)
def test_functions(expression: str, expected: object) -> None:
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("'hello'.charAt(-1)", "index out of range: -1"),
        ("'hello'.charAt(6)", "index out of range: 6"),
        ("'hello mellow'.indexOf('ello', -1)", "index out of range: -1"),
        ("'hello mellow'.lastIndexOf('ello', -1)", "index out of range: -1"),
        ("'tacocat'.substring(-1)", "index out of range: -1"),
        ("'tacocat'.substring(8)", "index out of range: 8"),
        ("'tacocat'.substring(2, 1)", "invalid substring range. start: 2, end: 1"),
        ("'tacocat'.substring(2, 8)", "index out of range: 8"),
        ("dyn(['a', 1]).join()", "join: invalid input: 1"),
        ("'gums'.reverse()", "found no matching overload for 'reverse' applied to '(string)'"),
        ("'abc'.charAt('1')", "found no matching overload for 'charAt' applied to '(string, string)'"),
        ("'a'.matches('[')", "invalid regular expression '['"),
    ],
)
def test_errors(expression: str, detail: str) -> None:
    assert fails(expression) == detail


@pytest.mark.parametrize(
    ("template", "args", "expected"),
    [
        ("%d and %s", "[5, 'x']", "5 and x"),
        ("%s", "[[1, 'x', true, 2.5]]", '[1, "x", true, 2.500000]'),
        ("%s", "[{'b': 1, 'a': 'x'}]", '{"a":"x", "b":1}'),
        ("%s", "[2.71]", "2.71"),
        ("%s", "[0.000000002]", "2e-09"),
        ("%s", "[100.0]", "100"),
        ("%s", "[1e21]", "1e+21"),
        ("%s", "[null]", "null"),
        ("%s", "[1u]", "1"),
        ("%.3f", "[1234.5]", "1,234.500"),  # en_US groups thousands
        ("%.2f", "[-1234567.891]", "-1,234,567.89"),
        ("%f", "[2.71828]", "2.718280"),
        ("%f", "['NaN']", "NaN"),
        ("%b", "[5]", "101"),
        ("%b", "[true]", "1"),
        ("%x", "[26]", "1a"),
        ("%X", "[26]", "1A"),
        ("%x", "['hi']", "6869"),
        ("%o", "[8]", "10"),
        ("%d", "[-5]", "-5"),
        ("100%%", "[]", "100%"),
    ],
)
def test_format(template: str, args: str, expected: str) -> None:
    assert value(f"{template!r}.format({args})") == expected


@pytest.mark.parametrize(
    ("template", "args", "detail"),
    [
        (
            "%d",
            "['x']",
            "error during formatting: decimal clause can only be used on integers, was given string",
        ),
        ("%d %d", "[1]", "index 1 out of range"),
        ("%", "[1]", "unexpected end of string"),
        ("%z", "[1]", 'could not parse formatting clause: unrecognized formatting clause "z"'),
        ("%e", "[1.0]", "the %e formatting clause is not supported by dra-operators"),
    ],
)
def test_format_errors(template: str, args: str, detail: str) -> None:
    assert fails(f"{template!r}.format({args})") == detail
