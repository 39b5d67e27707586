"""Exact texts: Go quoting and UTF-8 truncation (spec section 8, vector 89)."""

from __future__ import annotations

import pytest
from poolstatus_builders import A, device, fixture_g_slices, only_pool

from operators.poolstatus import messages


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("Full", '"Full"'),
        ('Half "A"', '"Half \\"A\\""'),
        ("a\\b", '"a\\\\b"'),
        ("\t", '"\\t"'),
        ("\x01", '"\\x01"'),
        ("é", '"é"'),
        ("\x7f", '"\\x7f"'),
        ("\a\b\f\n\r\v", '"\\a\\b\\f\\n\\r\\v"'),
        ("\u00a0", '"\\u00a0"'),
        ("\u200b", '"\\u200b"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("日本", '"日本"'),
        ("a b", '"a b"'),
    ],
)
def test_go_quote(value: str, quoted: str) -> None:
    assert messages.go_quote(value) == quoted


def test_v89_quoting_inside_cost_mismatch() -> None:
    devices = [
        device("d0", attributes={"profile": 'Half "A"'}, consumes=[("gpu-0", {"memory": "40Gi"})]),
        device("d1", attributes={"profile": 'Half "A"'}, consumes=[("gpu-0", {"memory": "50Gi"})]),
    ]
    pool = only_pool(fixture_g_slices(devices=devices))
    assert pool["validationError"] == (
        'PartitionCostMismatch: devices of partition type "Half \\"A\\"" in pool gpu.example.com/pool-1 '
        "consume different counters"
    )
    assert A in messages.partition_type_missing("d", "p", "x", A)


def test_pool_incomplete_for_long_pool_name_is_its_first_256_bytes() -> None:
    pool_name = "p" * 240
    full = (
        f"PoolIncomplete: pool gpu.example.com/{pool_name} is incomplete: observed 1/2 slices at generation 1"
    )
    text = messages.pool_incomplete("gpu.example.com", pool_name, 1, 2, 1)
    assert text == full[:256]
    assert len(text.encode()) == 256


def test_validation_error_of_multibyte_type_stays_within_256_bytes() -> None:
    text = messages.partition_cost_mismatch("gpu.example.com", "pool-1", "é" * 200)
    assert len(text.encode()) <= 256
    text.encode().decode("utf-8")  # still valid UTF-8


@pytest.mark.parametrize("prefix", messages.VALIDATION_PREFIXES)
def test_prefix_of(prefix: str) -> None:
    assert messages.prefix_of(f"{prefix} anything") == prefix


def test_message_counts() -> None:
    assert messages.complete_message(1, 0) == "Calculated status for 1 pools"
    assert messages.complete_message(2, 1) == "Calculated status for 2 pools (1 incomplete)"
    assert messages.complete_message(0, 0) == "Calculated status for 0 pools"
