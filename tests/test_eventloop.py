"""Operator processes run on uvloop where it is installed, on asyncio's own loop elsewhere."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from operators.core.eventloop import new_event_loop


def test_the_loop_is_uvloops_where_it_is_installed() -> None:
    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
        assert loop.run_until_complete(asyncio.sleep(0, result="ran")) == "ran"
    finally:
        loop.close()


def test_without_uvloop_the_loop_is_asyncios(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail, as on a platform without the package.
    monkeypatch.setitem(sys.modules, "uvloop", None)
    loop = new_event_loop()
    try:
        assert not isinstance(loop, uvloop.Loop)
        assert isinstance(loop, asyncio.BaseEventLoop)
    finally:
        loop.close()
