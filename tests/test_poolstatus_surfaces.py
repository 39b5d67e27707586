"""Which request APIs the operator serves (spec section 2.2, vector 86)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from operators.core.discovery import ServedResource
from operators.poolstatus.surfaces import (
    BUILTIN,
    PROJECT,
    Decision,
    Mode,
    Surface,
    available,
    changes,
    decide,
)

AUTO: dict[Surface, Mode] = {BUILTIN: "auto", PROJECT: "auto"}


def test_paths() -> None:
    assert BUILTIN.path() == "/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests"
    assert (
        PROJECT.path("x", subresource="status")
        == "/apis/dra-operators.io/v1alpha1/resourcepoolstatusrequests/x/status"
    )
    assert PROJECT.api_version == "dra-operators.io/v1alpha1"


def test_available_needs_the_status_subresource() -> None:
    requests = ServedResource(BUILTIN.group, BUILTIN.version, BUILTIN.plural, False)
    assert available(replace(requests, subresources=frozenset({"status"})))
    assert not available(requests)
    assert not available(None)


@pytest.mark.parametrize(
    ("builtin", "crd", "served"),
    [
        (True, True, (BUILTIN, PROJECT)),
        (False, True, (PROJECT,)),
        (True, False, (BUILTIN,)),
        (False, False, ()),
    ],
)
def test_vector_86_auto(builtin: bool, crd: bool, served: tuple[Surface, ...]) -> None:
    assert decide(AUTO, {BUILTIN: builtin, PROJECT: crd}) == Decision(served, ())


def test_on_and_off() -> None:
    both = {BUILTIN: True, PROJECT: True}
    assert decide({BUILTIN: "off", PROJECT: "auto"}, both).served == (PROJECT,)
    missing = decide({BUILTIN: "auto", PROJECT: "on"}, {BUILTIN: True, PROJECT: False})
    assert missing.missing_required == (PROJECT,)
    assert decide({BUILTIN: "on", PROJECT: "off"}, both) == Decision((BUILTIN,), ())


def test_changes_ask_for_a_restart() -> None:
    assert changes(AUTO, (BUILTIN,), {BUILTIN: True, PROJECT: False}) == []
    assert changes(AUTO, (BUILTIN,), {BUILTIN: True, PROJECT: True}) == [
        "API surface dra-operators.io/v1alpha1 became available"
    ]
    assert changes(AUTO, (BUILTIN, PROJECT), {BUILTIN: False, PROJECT: True}) == [
        "API surface resource.k8s.io/v1alpha3 became unavailable"
    ]
    assert changes({BUILTIN: "off", PROJECT: "auto"}, (PROJECT,), {BUILTIN: True, PROJECT: True}) == []
