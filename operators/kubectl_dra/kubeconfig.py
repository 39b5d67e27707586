"""Which kubeconfig a user tool reads: ``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``.

The operators never read ``$KUBECONFIG`` implicitly (tests run several identities in one process),
but ``kubectl dra`` and the demo helpers are user tools run from a shell, where ``$KUBECONFIG`` is
what kubectl itself honours. A ``$KUBECONFIG`` list (``a:b``) is passed on whole: the loader merges
it as kubectl does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


class NoKubeconfig(Exception):
    pass


def resolve(explicit: str | None, environ: Mapping[str, str] | None = None, home: Path | None = None) -> str:
    if explicit:
        if not Path(explicit).expanduser().is_file():
            raise NoKubeconfig(f"--kubeconfig {explicit}: no such file")
        return str(Path(explicit).expanduser())
    env = os.environ if environ is None else environ
    listed = env.get("KUBECONFIG", "")
    if listed:
        present = [p for p in listed.split(os.pathsep) if p and Path(p).expanduser().is_file()]
        if not present:
            raise NoKubeconfig(f"$KUBECONFIG names no existing file: {listed}")
        return os.pathsep.join(str(Path(p).expanduser()) for p in present)
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return str(default)
    raise NoKubeconfig("no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or create ~/.kube/config")
