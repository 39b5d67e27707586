"""The devcluster launcher without processes, for the tests of what it starts components with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from devcluster import launcher


class LaunchRecorder(launcher.Launcher):
    """The launcher's sequence with every process and readiness probe left out: ``spawned`` holds
    each component's arguments."""

    def __init__(self, options: launcher.UpOptions) -> None:
        super().__init__(options, say=lambda _: None)
        self.spawned: dict[str, list[str]] = {}

    def _spawn(
        self, name: str, args: list[str], port: int, binary_dir: Path | None = None, loopback: bool = True
    ) -> None:
        self.spawned[name] = args
        self.components[name] = launcher.ComponentState(0, name, port, "", args)

    def _wait(
        self, name: str, check: Callable[[], tuple[bool, str]], limit: float, deadline: float, url: str
    ) -> None:
        return None
