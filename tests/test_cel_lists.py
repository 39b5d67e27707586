"""List functions of DRA CEL: cel-go's list extension v3, Kubernetes' list library v1, cel-go's sets.

Results and errors were checked against Kubernetes v1.37.2's CEL environment. Literals that mix
types are wrapped in ``dyn()``, as Kubernetes' type-checker requires.
"""

from __future__ import annotations

import pytest
from cel_support import fails, value


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # cel-go list extension, version 3
        ("[1,2,3,4].slice(1, 3)", [2, 3]),
        ("[1,2,3,4].slice(2, 4)", [3, 4]),
        ("dyn([1,[2,3],[4]]).flatten()", [1, 2, 3, 4]),
        ("dyn([1,[2,[3,4]]]).flatten()", [1, 2, [3, 4]]),
        ("dyn([1,2,[],[],[3,4]]).flatten()", [1, 2, 3, 4]),
        ("dyn([1,[2,[3,[4]]]]).flatten(2)", [1, 2, 3, [4]]),
        ("[3, 2, 1].sort()", [1, 2, 3]),
        ("['b', 'c', 'a'].sort()", ["a", "b", "c"]),
        ("[5, 3, 1, 2].reverse()", [2, 1, 3, 5]),
        ("[1, 2, 2, 3, 3, 3].distinct()", [1, 2, 3]),
        ("['b', 'b', 'c', 'a', 'c'].distinct()", ["b", "c", "a"]),
        ("dyn([1, 'b', 2, 'b']).distinct()", [1, "b", 2]),
        ("dyn([1, 1.0, 1u]).distinct()", [1]),  # numeric equality across types
        ("lists.range(5)", [0, 1, 2, 3, 4]),
        ("lists.range(0)", []),
        ("[3, 1, 2].sortBy(x, -x)", [3, 2, 1]),
        ("['aa', 'b', 'ccc'].sortBy(s, s.size())", ["b", "aa", "ccc"]),
        # Kubernetes list library, version 1
        ("[1, 2, 3].isSorted()", True),
        ("['a', 'b', 'b', 'c'].isSorted()", True),
        ("[2.0, 1.0].isSorted()", False),
        ("[1].isSorted() && [].isSorted()", True),
        ("[1, 3].sum()", 4),
        ("[1.0, 3.0].sum()", 4.0),
        ("[].sum()", 0),
        ("[1u, 2u].sum()", 3),
        ("[1, 3].min()", 1),
        ("[1, 3].max()", 3),
        ("['b', 'a'].min()", "a"),
        ("[1, 2, 2, 3].indexOf(2)", 1),
        ("['a', 'b', 'b', 'c'].lastIndexOf('b')", 2),
        ("[1.0].indexOf(1.1)", -1),
        ("[].indexOf('string')", -1),
        ("dyn([1, 'a']).indexOf('a')", 1),
        ("[1, 2, 3].includes(2)", True),
        ("[1, 2, 3].includes(4)", False),
        ("'model-a'.includes('model-a')", True),  # a scalar compares with a scalar
        ("'model-a'.includes('model-b')", False),
        # cel-go set extension
        ("sets.contains([1, 2, 3], [2, 3])", True),
        ("sets.contains([1, 2], [3])", False),
        ("sets.contains([1, 2], [])", True),
        ("sets.equivalent([1, 2], [2, 1, 1])", True),
        ("sets.intersects([1, 2], [2, 5])", True),
        ("sets.intersects([1], [])", False),
    ],
)
def test_functions(expression: str, expected: object) -> None:
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ("[1,2,3,4].slice(-1, 3)", "cannot slice(-1, 3), negative indexes not supported"),
        ("[1,2,3,4].slice(3, 1)", "cannot slice(3, 1), start index must be less than or equal to end index"),
        ("[1,2,3,4].slice(1, 5)", "cannot slice(1, 5), list is length 4"),
        ("dyn([1,[2,[3,[4]]]]).flatten(-1)", "level must be non-negative"),
        ("dyn([1, 'b']).sort()", "list elements must have the same type"),
        ("[[1, 2, 3]].sort()", "list elements must be comparable"),
        ("lists.range(-1)", "lists.range: size must be non-negative, got -1"),
        ("lists.range(1000001)", "lists.range: size 1000001 exceeds maximum allowed (1000000)"),
        ("[].min()", "min called on empty list"),
        ("[].max()", "max called on empty list"),
        ("[9223372036854775807, 1].sum()", "integer overflow"),
    ],
)
def test_errors(expression: str, detail: str) -> None:
    assert fails(expression) == detail
