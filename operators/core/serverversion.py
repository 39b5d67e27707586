"""Which Kubernetes versions the project supports, read from the API server's ``/version``.

The operators and ``kubectl dra`` read 1.35's, 1.36's and 1.37's DRA APIs; on an older server they
would misread what they find (1.34's DeviceTaintRules select by class and CEL, which the project
does not evaluate), so both refuse it with the one sentence :func:`refusal` writes.

Pure: the caller reads ``/version`` and hands over the parsed JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MINIMUM = (1, 35)
"""The oldest (major, minor) supported."""

SUPPORT_DOCS = "docs/install.md, Supported Kubernetes versions"

# v1.35.4, v1.36.0-rc.1, v1.35.4-eks-abc, v1.35.4+k3s1: the numbers come first, whatever follows.
_GIT_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")
# "35", or "35+" as some managed clusters report their minor.
_NUMBER = re.compile(r"^(\d+)\+?$")


@dataclass(frozen=True)
class ServerVersion:
    major: int
    minor: int
    shown: str
    """As the server names itself (``gitVersion``), for messages."""

    @property
    def supported(self) -> bool:
        return (self.major, self.minor) >= MINIMUM


def parse_server_version(document: Mapping[str, Any]) -> ServerVersion | None:
    """The version in a ``/version`` answer: ``gitVersion`` first, else ``major`` and ``minor``;
    None when neither can be read (the caller cannot tell, and does not refuse).

    A ``gitVersion`` of major 0 is a build without a release version (``v0.0.0-master+...``), not
    Kubernetes 0: it tells nothing."""
    git_version = str(document.get("gitVersion") or "").strip()
    found = _GIT_VERSION.match(git_version)
    if found and int(found.group(1)) > 0:
        return ServerVersion(int(found.group(1)), int(found.group(2)), git_version)
    major = _NUMBER.match(str(document.get("major") or "").strip())
    minor = _NUMBER.match(str(document.get("minor") or "").strip())
    if major and minor and int(major.group(1)) > 0:
        numbers = (int(major.group(1)), int(minor.group(1)))
        shown = git_version if found is None and git_version else f"v{numbers[0]}.{numbers[1]}"
        return ServerVersion(*numbers, shown)
    return None


def refusal(document: Mapping[str, Any]) -> str | None:
    """The one line that refuses an unsupported server, or None (supported, or not readable)."""
    version = parse_server_version(document)
    if version is None or version.supported:
        return None
    needed = f"{MINIMUM[0]}.{MINIMUM[1]}"
    return (
        f"Kubernetes {version.shown} is not supported: dra-operators needs {needed} or later "
        f"(docs: {SUPPORT_DOCS})"
    )
