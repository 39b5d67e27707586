"""The ``device`` variable of DRA CEL selectors, built from a device published in a ResourceSlice.

Kubernetes gives a selector four fields (k8s.io/dynamic-resource-allocation/cel)::

    device.driver                    string
    device.allowMultipleAllocations  bool (false when the device does not say)
    device.attributes[domain][id]    int, bool, string, Semver, or a list of one of those
    device.capacity[domain][id]      Quantity

Attribute and capacity names are qualified names. ``domain/id`` is split at the first slash; a name
without a domain belongs to the driver, so a driver publishing ``model`` is read as
``device.attributes["<driver>"].model``. Looking up a domain the device does not have yields an
empty map (see :class:`DefaultMap`), so the error a selector reports is about the missing
*attribute*.

An attribute that cannot be converted (no value set, or a version blang/semver rejects) fails the
evaluation of every expression for that device, as it does in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from celpy import celtypes
from pydantic import BeforeValidator, Field

from operators.core.models import KubeModel

from .errors import FunctionError
from .quantity import CelQuantity
from .semver import parse_semver
from .values import DefaultMap

__all__ = ["CelDevice", "DeviceAttribute", "DeviceCapacity", "device_variable", "split_qualified_name"]


class DeviceAttribute(KubeModel):
    """``resource.k8s.io/v1`` DeviceAttribute: exactly one of the fields is set."""

    int_value: int | None = Field(default=None, alias="int")
    bool_value: bool | None = Field(default=None, alias="bool")
    string_value: str | None = Field(default=None, alias="string")
    version_value: str | None = Field(default=None, alias="version")
    int_values: tuple[int, ...] | None = Field(default=None, alias="ints")
    bool_values: tuple[bool, ...] | None = Field(default=None, alias="bools")
    string_values: tuple[str, ...] | None = Field(default=None, alias="strings")
    version_values: tuple[str, ...] | None = Field(default=None, alias="versions")


def _number_as_text(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class DeviceCapacity(KubeModel):
    """``resource.k8s.io/v1`` DeviceCapacity; the value is kept as text and parsed the way Go parses it."""

    # The API always sends a string; a hand-written object may carry a bare JSON number.
    value: Annotated[str, BeforeValidator(_number_as_text)]


class CelDevice(KubeModel):
    """What a CEL selector sees of one device."""

    driver: str
    attributes: Mapping[str, DeviceAttribute] = {}
    capacity: Mapping[str, DeviceCapacity] = {}
    allow_multiple_allocations: bool | None = None


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of a qualified name; an unqualified name belongs to the driver's domain."""
    domain, separator, identifier = name.partition("/")
    return (domain, identifier) if separator else (driver, name)


def _version(text: str) -> Any:
    try:
        return parse_semver(text)
    except FunctionError as error:
        raise FunctionError(f"parse semantic version: {error}") from None


def _attribute_value(attribute: DeviceAttribute) -> Any:
    """The CEL value of an attribute, checking the fields in the order Kubernetes does."""
    if attribute.int_values is not None:
        return celtypes.ListType(celtypes.IntType(v) for v in attribute.int_values)
    if attribute.bool_values is not None:
        return celtypes.ListType(celtypes.BoolType(v) for v in attribute.bool_values)
    if attribute.string_values is not None:
        return celtypes.ListType(celtypes.StringType(v) for v in attribute.string_values)
    if attribute.version_values is not None:
        return celtypes.ListType(_version(v) for v in attribute.version_values)
    if attribute.int_value is not None:
        return celtypes.IntType(attribute.int_value)
    if attribute.bool_value is not None:
        return celtypes.BoolType(attribute.bool_value)
    if attribute.string_value is not None:
        return celtypes.StringType(attribute.string_value)
    if attribute.version_value is not None:
        return _version(attribute.version_value)
    raise FunctionError("unsupported attribute value")


def device_variable(device: CelDevice) -> celtypes.MapType:
    """The ``device`` map; raises FunctionError naming the attribute or capacity that cannot be used."""
    attributes: dict[str, dict[celtypes.StringType, Any]] = {}
    for name, attribute in sorted(device.attributes.items()):
        try:
            value = _attribute_value(attribute)
        except FunctionError as error:
            raise FunctionError(f"attribute {name}: {error}") from None
        domain, identifier = split_qualified_name(name, device.driver)
        attributes.setdefault(domain, {})[celtypes.StringType(identifier)] = value
    capacity: dict[str, dict[celtypes.StringType, Any]] = {}
    for name, entry in sorted(device.capacity.items()):
        try:
            amount = CelQuantity.parse(entry.value)
        except FunctionError as error:
            raise FunctionError(f"capacity {name}: {error}") from None
        domain, identifier = split_qualified_name(name, device.driver)
        capacity.setdefault(domain, {})[celtypes.StringType(identifier)] = amount
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(device.driver),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                bool(device.allow_multiple_allocations)
            ),
            celtypes.StringType("attributes"): DefaultMap(
                {celtypes.StringType(k): celtypes.MapType(v) for k, v in attributes.items()}
            ),
            celtypes.StringType("capacity"): DefaultMap(
                {celtypes.StringType(k): celtypes.MapType(v) for k, v in capacity.items()}
            ),
        }
    )
