"""The kubeconfig file(s) a user tool reads, for tools that need a file rather than credentials.

The demo's fake driver hands a path to :class:`devcluster.kube.Kube`; the plugin itself connects through
:func:`operators.core.client.load_configuration`. Both use the one resolution order,
:func:`operators.core.credentials.locate_credentials`; this module only leaves the in-cluster
service account out, since it has no file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from operators.core.credentials import locate_credentials
from operators.core.settings import ConfigurationError

NoKubeconfig = ConfigurationError


def resolve(explicit: str | None, environ: Mapping[str, str] | None = None, home: Path | None = None) -> str:
    """``--kubeconfig``, else ``$KUBECONFIG`` (its existing files, ``a:b``), else ``~/.kube/config``."""
    return locate_credentials(explicit, environ=environ, home=home, in_cluster=False).where
