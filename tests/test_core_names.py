"""The name formats of apimachinery's validation, as the API server applies them."""

from __future__ import annotations

import pytest

from operators.core.names import (
    is_dns_label,
    is_dns_subdomain,
    is_label_value,
    is_qualified_name,
    label_value_of,
)


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


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("", True),
        ("Unhealthy", True),
        ("my_value", True),
        ("v1.2-rc_3", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("-a", False),
        ("a_", False),
        ("a.", False),
        ("Vendor:Timeout", False),
        ("a,b", False),
        ("a b", False),
        ("gpu\n", False),
        ("é", False),
    ],
)
def test_label_values(value: str, valid: bool) -> None:
    assert is_label_value(value) is valid


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("AttachFailed", "AttachFailed"),
        ("Vendor:Timeout,", "Vendor-Timeout"),
        ("Vendor:Timeout", "Vendor-Timeout"),
        ("Timed_out_", "Timed_out"),
        ("a,b:c", "a-b-c"),
        ("A" * 62 + "_B", "A" * 62),
        ("_x" + "y" * 70, "x" + "y" * 61),
        (":,_", ""),
        ("Grüße", "Gr--e"),
        ("", ""),
    ],
)
def test_any_text_is_made_a_label_value_the_same_way_each_time(text: str, value: str) -> None:
    assert label_value_of(text) == value
    assert is_label_value(value)
    assert label_value_of(value) == value, "a label value is its own"
