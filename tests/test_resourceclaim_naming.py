"""The generateName table of spec section 7.2 (and acceptance scenario 3)."""

from __future__ import annotations

import re

import pytest

from operators.resourceclaim.naming import claim_generate_name


@pytest.mark.parametrize(
    ("pod_name", "entry_name", "expected"),
    [
        ("my-pod", "gpu", "my-pod-gpu-"),
        ("x" * 50, "y" * 5, "x" * 50 + "-" + "y" * 5 + "-"),
        ("x" * 50, "y" * 6, "x" * 49 + "-" + "y" * 5),
        ("a" * 60, "gpu", "a" * 52 + "-gp"),
        ("p" * 30, "c" * 30, "p" * 27 + "-" + "c" * 27),
    ],
)
def test_generate_name_table(pod_name: str, entry_name: str, expected: str) -> None:
    assert claim_generate_name(pod_name, entry_name) == expected


@pytest.mark.parametrize(
    ("pod_name", "entry_name"), [("x" * 50, "y" * 5), ("x" * 50, "y" * 6), ("a" * 253, "b" * 63)]
)
def test_generate_name_never_exceeds_the_base_limit(pod_name: str, entry_name: str) -> None:
    assert len(claim_generate_name(pod_name, entry_name)) <= 57


def test_truncated_name_has_no_trailing_hyphen() -> None:
    assert not claim_generate_name("a" * 60, "gpu").endswith("-")


@pytest.mark.parametrize(
    ("pod_name", "entry_name", "expected"),
    [
        # Upstream's form cuts right after the dot: "<52 x>.-gp", which kube-apiserver refuses.
        ("x" * 52 + "." + "y" * 20, "gpu", "x" * 52 + "-gp"),
        # Upstream's form leaves no pod part: "-<54 g>", refused as well.
        ("a", "g" * 63, "g" * 54),
    ],
)
def test_a_shortened_name_stays_a_valid_name(pod_name: str, entry_name: str, expected: str) -> None:
    name = claim_generate_name(pod_name, entry_name)
    assert name == expected
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name + "bcdfg")
