"""A bounded memory of keys, for caches that must remember what they saw deleted."""

from __future__ import annotations

from collections import OrderedDict


class RecentKeys:
    """The ``limit`` most recently added keys; the oldest is forgotten first.

    A cache that removes an object on its DELETED event must still refuse an older copy of it
    that arrives later (an answer that raced the event) and must know that the object is gone.
    UIDs are never reused, so remembering the recent ones is enough, in bounded memory.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._keys: OrderedDict[str, None] = OrderedDict()

    def add(self, key: str) -> None:
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self.limit:
            self._keys.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)
