"""Kubeconfig files for tests that run a command line or an operator against a fake API server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import yaml
from aiohttp import web


def empty_kubeconfig(tmp_path: Path) -> str:
    """The path of a kubeconfig naming no cluster: enough where the test fakes the session."""
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return str(path)


@asynccontextmanager
async def local_api_server(
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]], tmp_path: Path
) -> AsyncIterator[str]:
    """Serves every path with ``handle`` on a free local port while the block runs, and yields the
    path of a kubeconfig whose current context reaches it over plain HTTP with a token."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        config = tmp_path / "kubeconfig"
        config.write_text(
            yaml.safe_dump(
                {
                    "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                    "current-context": "fake",
                }
            )
        )
        yield str(config)
    finally:
        await runner.cleanup()
