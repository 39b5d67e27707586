"""The name formats of apimachinery's validation, as the API server applies them."""

from __future__ import annotations

import pytest

from operators.core.names import is_dns_label, is_dns_subdomain, is_qualified_name


@pytest.mark.parametrize(
    ("value", "label", "subdomain"),
    [
        ("gpu", True, True),
        ("gpu-0", True, True),
        ("0gpu", True, True),
        ("gpu.example.com", False, True),
        ("a" * 63, True, True),
        ("a" * 64, False, True),
        (".".join(["a" * 63] * 4), False, False),  # 255 characters
        ("-gpu", False, False),
        ("gpu-", False, False),
        ("Gpu", False, False),
        ("gpu..example", False, False),
        ("gpu\n", False, False),
        ("", False, False),
    ],
)
def test_dns_label_and_subdomain(value: str, label: bool, subdomain: bool) -> None:
    assert is_dns_label(value) is label
    assert is_dns_subdomain(value) is subdomain


def test_a_subdomain_can_be_held_to_a_shorter_limit() -> None:
    assert is_dns_subdomain("gpu.example.com", 15)
    assert not is_dns_subdomain("gpu.example.com", 14)


@pytest.mark.parametrize(
    ("value", "qualified"),
    [
        ("attached", True),
        ("gpu.fabric.example.com/attached", True),
        ("Attached_2.x", True),
        ("/attached", False),
        ("Upper.Example/attached", False),
        ("x/" + "a" * 64, False),
        ("a/b/c", False),
        ("", False),
    ],
)
def test_qualified_names(value: str, qualified: bool) -> None:
    assert is_qualified_name(value) is qualified
