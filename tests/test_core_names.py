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

# Each value against every format: (DNS label, DNS subdomain, qualified name, label value).
FORMATS = [
    ("gpu", True, True, True, True),
    ("gpu-0", True, True, True, True),
    ("0gpu", True, True, True, True),
    ("gpu.example.com", False, True, True, True),
    ("a" * 63, True, True, True, True),
    ("a" * 64, False, True, False, False),
    (".".join(["a" * 63] * 4), False, False, False, False),  # 255 characters
    ("-gpu", False, False, False, False),
    ("gpu-", False, False, False, False),
    ("Gpu", False, False, True, True),
    ("gpu..example", False, False, True, True),
    ("gpu\n", False, False, False, False),
    # A label value may be empty; a name may not.
    ("", False, False, False, True),
    ("gpu.fabric.example.com/attached", False, False, True, False),
    ("Attached_2.x", False, False, True, True),
    ("/attached", False, False, False, False),
    ("Upper.Example/attached", False, False, False, False),
    ("x/" + "a" * 64, False, False, False, False),
    ("a/b/c", False, False, False, False),
    ("v1.2-rc_3", False, False, True, True),
    ("a_", False, False, False, False),
    ("a.", False, False, False, False),
    ("Vendor:Timeout", False, False, False, False),
    ("a,b", False, False, False, False),
    ("a b", False, False, False, False),
    ("é", False, False, False, False),
]


@pytest.mark.parametrize(("value", "label", "subdomain", "qualified", "label_value"), FORMATS)
def test_each_name_format(
    value: str, label: bool, subdomain: bool, qualified: bool, label_value: bool
) -> None:
    assert is_dns_label(value) is label
    assert is_dns_subdomain(value) is subdomain
    assert is_qualified_name(value) is qualified
    assert is_label_value(value) is label_value


def test_a_subdomain_can_be_held_to_a_shorter_limit() -> None:
    assert is_dns_subdomain("gpu.example.com", 15)
    assert not is_dns_subdomain("gpu.example.com", 14)


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
