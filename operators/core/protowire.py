"""Edits of a Kubernetes object in its protobuf form that leave every other byte as it was.

Some writes cannot go through JSON. kube-apiserver keeps a ``runtime.RawExtension`` (a claim's
opaque device parameters) as the exact bytes a client sent, compares those bytes on update, and
serves them through Go's JSON encoder, which compacts them: a claim created with
``{"a": "b"}`` is served as ``{"a":"b"}``, so no JSON client can send its spec back unchanged,
and kube-apiserver refuses every update of it, a JSON patch or an apply included ("spec: Invalid
value: null: field is immutable"). Go controllers never meet this, because they read and write
protobuf. So do the writes that need it here: the object is read as protobuf, the fields to
change are found by their field numbers (``generated.proto`` of the API), and everything else,
fields this code does not know included, is written back byte for byte.

Only length-delimited fields are ever changed or read; the others are carried as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
# kube-apiserver's protobuf envelope: these four bytes, then a runtime.Unknown.
MAGIC = b"k8s\x00"

_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5

# runtime.Unknown and runtime.TypeMeta.
_UNKNOWN_TYPE_META, _UNKNOWN_RAW = 1, 2
_TYPE_META_API_VERSION, _TYPE_META_KIND = 1, 2


class ProtobufError(ValueError):
    """The bytes are not the protobuf this module expects."""


@dataclass(frozen=True)
class Field:
    number: int
    wire_type: int
    # The value's bytes: a length-delimited field's content, or a scalar's encoding as read.
    value: bytes


def _varint(data: bytes, at: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if at >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, at
        shift += 7
        if shift > 63:
            raise ProtobufError("varint longer than 64 bits")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def parse(data: bytes) -> list[Field]:
    """The fields of one message, in their order."""
    fields = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire_type = key >> 3, key & 7
        start = at
        if wire_type == _VARINT:
            _, at = _varint(data, at)
        elif wire_type == _FIXED64:
            at += 8
        elif wire_type == _FIXED32:
            at += 4
        elif wire_type == _LENGTH:
            length, start = _varint(data, at)
            at = start + length
        else:
            raise ProtobufError(f"field {number}: wire type {wire_type} is not used by Kubernetes objects")
        if at > len(data) or number == 0:
            raise ProtobufError(f"field {number}: truncated or invalid")
        fields.append(Field(number, wire_type, data[start:at]))
    return fields


def encode(fields: Iterable[Field]) -> bytes:
    out = bytearray()
    for field in fields:
        out += _encode_varint(field.number << 3 | field.wire_type)
        if field.wire_type == _LENGTH:
            out += _encode_varint(len(field.value))
        out += field.value
    return bytes(out)


def string_field(number: int, value: str) -> Field:
    return Field(number, _LENGTH, value.encode())


def values(message: bytes, number: int) -> list[bytes]:
    """The contents of every length-delimited field ``number`` (a repeated field's entries)."""
    return [f.value for f in parse(message) if f.number == number and f.wire_type == _LENGTH]


def text(message: bytes, number: int) -> str:
    """A string field, "" when absent."""
    found = values(message, number)
    return found[-1].decode() if found else ""


def replaced(message: bytes, number: int, new_values: Iterable[bytes]) -> bytes:
    """``message`` with field ``number`` holding exactly ``new_values`` (none: the field is gone),
    where the field was (or at the end); every other field stays as it was."""
    fields = parse(message)
    new = [Field(number, _LENGTH, value) for value in new_values]
    out: list[Field] = []
    placed = False
    for field in fields:
        if field.number != number:
            out.append(field)
        elif not placed:
            out += new
            placed = True
    if not placed:
        out += new
    return encode(out)


def edited(message: bytes, number: int, change: Callable[[bytes], bytes]) -> bytes:
    """``message`` with the embedded message ``number`` changed by ``change`` (which receives
    b"" where the field is absent)."""
    found = values(message, number)
    return replaced(message, number, [change(found[-1] if found else b"")])


def unwrap(envelope: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, the object's message) of a protobuf answer of kube-apiserver."""
    if not envelope.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf envelope")
    unknown = envelope[len(MAGIC) :]
    type_meta = values(unknown, _UNKNOWN_TYPE_META)
    raw = values(unknown, _UNKNOWN_RAW)
    if not type_meta or not raw:
        raise ProtobufError("the envelope has no type or no object")
    return text(type_meta[-1], _TYPE_META_API_VERSION), text(type_meta[-1], _TYPE_META_KIND), raw[-1]


def wrap(api_version: str, kind: str, message: bytes) -> bytes:
    """The envelope kube-apiserver reads a protobuf request body from."""
    type_meta = encode(
        [string_field(_TYPE_META_API_VERSION, api_version), string_field(_TYPE_META_KIND, kind)]
    )
    return MAGIC + encode(
        [Field(_UNKNOWN_TYPE_META, _LENGTH, type_meta), Field(_UNKNOWN_RAW, _LENGTH, message)]
    )
