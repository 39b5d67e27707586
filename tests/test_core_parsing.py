"""The one way a watch callback turns a body into a projection, or logs and skips it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from operators.core.models import (
    KubeModel,
    LeanMeta,
    LeanObject,
    OwnerReference,
    Tombstone,
    UnparsableObject,
    body_controller,
    body_key,
    body_name,
    controller_of,
    forget,
    last_known,
    parse,
    parse_or_skip,
    reference,
    store,
    store_if,
    tombstone,
)
from operators.dra.slices import ResourceSlice, SliceDevice


class Thing(KubeModel):
    size: int


def test_reference_uses_what_the_body_still_provides() -> None:
    assert reference({"kind": "Pod", "metadata": {"namespace": "ns", "name": "p"}}) == "Pod ns/p"
    assert reference({"metadata": {"name": "s"}}, "ResourceSlice") == "ResourceSlice s"
    assert reference({"metadata": "nonsense"}, "ResourceClaim") == "ResourceClaim (no metadata)"
    assert reference({}) == "object (no metadata)"


def test_parse_names_the_object_and_counts_the_errors() -> None:
    assert parse(Thing, {"size": 3}) == Thing(size=3)
    with pytest.raises(UnparsableObject, match=r"^Thing ns/t: 1 invalid field") as caught:
        parse(Thing, {"metadata": {"namespace": "ns", "name": "t"}, "size": "big"})
    assert caught.value.reference == "Thing ns/t"


def test_a_generic_projection_is_named_by_its_kind() -> None:
    with pytest.raises(UnparsableObject, match=r"^ResourceSlice s: 2 invalid field"):
        parse(ResourceSlice[SliceDevice], {"metadata": {"name": "s"}, "spec": {}})


def test_a_reader_of_the_model_parses_instead_of_its_fields_alone() -> None:
    def doubled(body: Mapping[str, Any]) -> Thing:
        return Thing.model_validate({"size": body["size"] * 2})

    assert parse(Thing, {"size": 2}, doubled) == Thing(size=4)


def test_parse_or_skip_logs_one_line_and_returns_none(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test")
    assert parse_or_skip(Thing, {"size": 1}, log) == Thing(size=1)
    assert parse_or_skip(Thing, {"kind": "Thing", "metadata": {"name": "t"}}, log) is None
    assert "skipping Thing t that cannot be parsed: 1 invalid field(s)" in caplog.text
    assert [record.__dict__["object"] for record in caplog.records] == ["Thing t"]


def test_body_name_and_key_read_what_the_metadata_provides() -> None:
    assert body_key({"metadata": {"namespace": "ns", "name": "p"}}) == ("ns", "p")
    assert body_key({"metadata": {"name": "s"}}) == ("", "s")
    assert body_name({"metadata": "nonsense"}) == ""
    assert body_name({}) == ""


def test_store_keeps_the_parsed_body_and_an_unparsable_one_changes_nothing() -> None:
    cache: dict[str, Thing] = {}
    assert store(cache, "t", Thing, {"size": 1}) == Thing(size=1)
    assert cache == {"t": Thing(size=1)}
    with pytest.raises(UnparsableObject):
        store(cache, "t", Thing, {"size": "big"})
    # Still there for the deletion the caller makes of it, which names whom it concerned.
    assert cache == {"t": Thing(size=1)}


def test_store_if_keeps_only_what_is_wanted_and_says_whether_the_cache_changed() -> None:
    cache: dict[str, Thing] = {}

    def big(thing: Thing) -> bool:
        return thing.size > 1

    assert not store_if(cache, "t", Thing, {"size": 1}, big)
    assert store_if(cache, "t", Thing, {"size": 2}, big)
    assert cache == {"t": Thing(size=2)}
    assert store_if(cache, "t", Thing, {"size": 1}, big)
    assert cache == {}
    cache["t"] = Thing(size=2)
    with pytest.raises(UnparsableObject):
        store_if(cache, "t", Thing, {"size": "big"}, big)
    assert cache == {"t": Thing(size=2)}


def test_a_tombstone_keeps_the_identity_and_nothing_else() -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Thing",
        "metadata": {"name": "t", "namespace": "ns", "uid": "U", "labels": {"a": "b"}},
        "size": 3,
    }
    gone = tombstone(body)
    assert isinstance(gone, Tombstone)
    assert gone == {
        "apiVersion": "v1",
        "kind": "Thing",
        "metadata": {"name": "t", "namespace": "ns", "uid": "U"},
    }


class Owned(LeanObject):
    size: int


def test_last_known_is_the_cached_object_of_the_same_uid_and_only_for_a_tombstone() -> None:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Thing",
        "metadata": {"name": "t", "namespace": "ns", "uid": "U"},
        "size": 3,
    }
    cached = parse(Owned, body)
    assert last_known(tombstone(body), cached) is cached
    assert last_known(body, cached) is None, "a final state that is known is read from the body"
    replaced = parse(Owned, {**body, "metadata": {**body["metadata"], "uid": "OTHER"}})
    assert last_known(tombstone(body), replaced) is None, "another object of that name is not the one gone"
    assert last_known(tombstone(body), None) is None


def test_forget_removes_what_the_deletion_names_but_not_the_successor_of_a_tombstone() -> None:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Thing",
        "metadata": {"name": "t", "uid": "U"},
        "size": 1,
    }
    kept = {"t": parse(Owned, body)}
    successor = parse(Owned, {**body, "metadata": {"name": "t", "uid": "NEW"}})
    assert forget({"t": successor}, "t", tombstone(body)) is None, "listed before its predecessor's tombstone"
    assert forget(dict(kept), "t", tombstone(body)) is kept["t"]
    assert forget(dict(kept), "t", body) is kept["t"], "a final state names what it removes by its key"
    assert forget({}, "t", body) is None


def test_the_controller_is_the_reference_that_says_so_and_its_kind_is_known_in_any_version() -> None:
    owner = {"apiVersion": "example.com/v1", "kind": "Thing", "name": "t", "uid": "U"}
    controller = {**owner, "apiVersion": "example.com/v2", "uid": "C", "controller": True}
    meta = LeanMeta.model_validate({"name": "x", "ownerReferences": [owner, controller]})
    assert meta.controller == OwnerReference.model_validate(controller)
    assert meta.controlled_by("C")
    assert not meta.controlled_by("U"), "an owner is not the controller"
    assert controller_of(meta.owner_references[:1]) is None
    assert body_controller({"metadata": {"ownerReferences": [owner, controller]}}) == meta.controller
    assert body_controller({"metadata": {"ownerReferences": [{"controller": True}]}}) is None
    assert body_controller({"metadata": None}) is None
    assert meta.controller is not None
    assert (meta.controller.group, OwnerReference.model_validate({**owner, "apiVersion": "v1"}).group) == (
        "example.com",
        "",
    )
    assert meta.controller.is_a("example.com", "Thing")
    assert not meta.controller.is_a("example.org", "Thing")
    assert not meta.controller.is_a("example.com", "Other")
