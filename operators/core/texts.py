"""Cutting a text to a limit, in the unit the limit is counted in.

A limit the API server checks with Go's ``len`` (an Event's message, poolstatus's
``validationError``) counts UTF-8 bytes, so the text is cut in bytes, on a character boundary so
that it stays valid UTF-8. A limit of the project's own (the binding attacher's action and
condition messages, spec §10.2 and §11.2) counts characters, as a reader does.

A ``marker`` (:data:`ELLIPSIS`) ends a text that was cut, within the limit (a limit too small for
it gets none), so that a reader sees it was; texts compared word for word (poolstatus's, which
match upstream's) are cut without one.
"""

from __future__ import annotations

__all__ = ["ELLIPSIS", "truncate_chars", "truncate_utf8"]

ELLIPSIS = "..."


def truncate_chars(text: str, max_chars: int, marker: str = "") -> str:
    """``text`` if it has at most ``max_chars`` characters, else its longest prefix that fits with
    ``marker`` after it."""
    if len(text) <= max_chars:
        return text
    if len(marker) > max_chars:
        marker = ""
    return text[: max_chars - len(marker)] + marker


def truncate_utf8(text: str, max_bytes: int, marker: str = "") -> str:
    """``text`` if it fits in ``max_bytes`` bytes of UTF-8, else its longest prefix that fits with
    ``marker`` after it."""
    # A lone surrogate (JSON can carry one as an escape) counts as the three bytes of the U+FFFD
    # Go reads it as, and must not make the cut raise.
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    room = max_bytes - len(marker.encode("utf-8", "surrogatepass"))
    if room < 0:
        marker, room = "", max_bytes
    while room and encoded[room] & 0xC0 == 0x80:  # a continuation byte: back to where its character starts
        room -= 1
    return encoded[:room].decode("utf-8", "surrogatepass") + marker
