"""Request bodies are written as Go's encoding/json writes them, so raw parameters survive.

The expected texts below were printed by Go's ``encoding/json`` (go1.26): a ``json.RawMessage``
holding the input, marshalled, which is what kube-apiserver does with a ``runtime.RawExtension``
when it serves an object as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import examples

from operators.core import wirejson

# (what a client stored, what kube-apiserver serves of it)
SERVED_BY_GO = [
    ('{"a":"b"}', '{"a":"b"}'),
    (
        '{"html":"<a href=\\"x\\">&amp;</a>","u":"é漢\u2028\u2029","ctl":"\\b\\f\\n\\r\\t\\u0001\\u001f"}',
        '{"html":"\\u003ca href=\\"x\\"\\u003e\\u0026amp;\\u003c/a\\u003e","u":"é漢\\u2028\\u2029",'
        '"ctl":"\\b\\f\\n\\r\\t\\u0001\\u001f"}',
    ),
    (
        '{"f":[1.50,1e5,1E400,1e-7,-0.0,0.1,100.0,12345678901234567890]}',
        '{"f":[1.50,1e5,1E400,1e-7,-0.0,0.1,100.0,12345678901234567890]}',
    ),
    ('{"b" : [ true , false , null ] , "a" : {}}', '{"b":[true,false,null],"a":{}}'),
    # A lone surrogate, which only an escape can write: Go serves the raw bytes as they were sent.
    ('{"lone":"\\ud800x","low":"\\udfff"}', '{"lone":"\\ud800x","low":"\\udfff"}'),
]


@pytest.mark.parametrize(("stored", "served"), SERVED_BY_GO)
def test_what_is_read_is_written_back_as_go_serves_it(stored: str, served: str) -> None:
    assert wirejson.dumps(wirejson.loads(served)) == served
    assert wirejson.dumps(wirejson.loads(stored)) == served


def test_a_lone_surrogate_read_is_a_body_that_can_be_sent() -> None:
    # A tenant's opaque parameters or a webhook's message may hold "\\ud800"; UTF-8 cannot
    # encode the character it reads as, and the write of its claim used to fail before it was sent.
    written = wirejson.dumps(wirejson.loads('{"message":"\\ud800 down"}'))
    assert written.encode() == b'{"message":"\\ud800 down"}'


def test_a_body_holding_the_parameters_keeps_them_byte_for_byte() -> None:
    claim = wirejson.loads(
        '{"spec":{"devices":{"config":[{"opaque":{"driver":"d","parameters":{"a":"b","n":1.50}}}]}},'
        '"metadata":{"finalizers":["resource.kubernetes.io/delete-protection"]}}'
    )
    claim["metadata"]["finalizers"] = []
    assert wirejson.dumps(claim) == (
        '{"spec":{"devices":{"config":[{"opaque":{"driver":"d","parameters":{"a":"b","n":1.50}}}]}},'
        '"metadata":{"finalizers":[]}}'
    )


def test_a_literal_float_is_still_a_float_to_everything_else() -> None:
    number = wirejson.loads("1.50")
    assert number == 1.5
    assert isinstance(number, float)
    assert json.dumps([number]) == "[1.5]"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@examples(200)
@given(json_values)
def test_writing_what_was_read_changes_nothing(value: Any) -> None:
    text = wirejson.dumps(value)
    assert json.loads(text) == value
    assert wirejson.dumps(wirejson.loads(text)) == text


def _nested_text(depth: int) -> str:
    return '{"a":[' * depth + '"bottom"' + "]}" * depth


def test_json_as_deep_as_the_server_reads_is_read_and_written_back() -> None:
    """10 KiB of a tenant's opaque parameters nest about 5 000 levels; Python stops at 1 000."""
    wirejson.read_what_the_server_reads()
    text = _nested_text(wirejson.DEEPEST // 2)
    assert wirejson.dumps(wirejson.loads(text)) == text


def test_deeper_json_is_a_value_error_that_names_the_limit() -> None:
    wirejson.read_what_the_server_reads()
    with pytest.raises(wirejson.TooDeep, match="nested deeper than this process reads"):
        wirejson.loads(_nested_text(wirejson.DEEPEST * 2))
    deep: Any = "bottom"
    for _ in range(wirejson.DEEPEST * 2):
        deep = [deep]
    with pytest.raises(wirejson.TooDeep, match="nested deeper than this process writes"):
        wirejson.dumps(deep)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"x":NaN}', "NaN"),
        ('{"x":Infinity}', "Infinity"),
        ('{"x":-Infinity}', "-Infinity"),
        ('{"x":1e400}', "1e400"),
        ('{"x":[-1E400]}', "-1E400"),
    ],
)
def test_a_strict_read_refuses_what_no_write_could_carry(text: str, named: str) -> None:
    """Python reads each of these, and :func:`wirejson.dumps` would refuse what it read."""
    with pytest.raises(wirejson.NotJSONNumber, match=named):
        wirejson.loads_strict(text)
    with pytest.raises(ValueError, match="not JSON compliant"):
        wirejson.dumps(json.loads(text))


@pytest.mark.parametrize("sign", ["", "-"])
def test_a_strict_read_refuses_an_integer_kube_apiserver_cannot_read(sign: str) -> None:
    """kube-apiserver validates a device status's data by reading it into Go's ``any``, where an
    integer is a float64; one beyond its range is refused with 422 (``error parsing data as JSON``).
    The largest float64, written as an integer, is read."""
    largest = str(int(sys.float_info.max))
    assert wirejson.loads_strict(f'{{"x":{sign}{largest}}}') == {"x": int(f"{sign}{largest}")}
    with pytest.raises(wirejson.NotJSONNumber, match="out of the range of a 64-bit float"):
        wirejson.loads_strict(f'{{"x":{sign}1{"0" * 400}}}')


def test_a_strict_read_is_an_ordinary_read_otherwise() -> None:
    text = '{"f":[1.50,1e5,1e-400,1.7976931348623157e308,12345678901234567890],"s":"<é>"}'
    read = wirejson.loads_strict(text)
    assert read == json.loads(text)
    assert not any(isinstance(number, wirejson.LiteralFloat) for number in read["f"])
    assert (
        wirejson.dumps(read)
        == '{"f":[1.5,100000.0,0.0,1.7976931348623157e+308,12345678901234567890],"s":"\\u003cé\\u003e"}'
    )


def test_a_strict_read_too_deep_is_a_value_error_that_names_the_limit() -> None:
    wirejson.read_what_the_server_reads()
    with pytest.raises(wirejson.TooDeep, match="nested deeper than this process reads"):
        wirejson.loads_strict(_nested_text(wirejson.DEEPEST * 2))
