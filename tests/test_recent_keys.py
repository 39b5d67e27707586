"""The bounded memory of deleted objects' keys (operators.core.recent)."""

from __future__ import annotations

from operators.core.recent import RecentKeys


def test_the_oldest_key_is_forgotten_first() -> None:
    recent = RecentKeys(2)
    for key in ("a", "b", "c"):
        recent.add(key)
    assert "a" not in recent
    assert "b" in recent
    assert "c" in recent
    assert len(recent) == 2


def test_adding_a_key_again_makes_it_the_newest() -> None:
    recent = RecentKeys(2)
    recent.add("a")
    recent.add("b")
    recent.add("a")
    recent.add("c")
    assert "a" in recent
    assert "c" in recent
    assert "b" not in recent
