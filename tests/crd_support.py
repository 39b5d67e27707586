"""The project's CRD files as the CRD tests read them, and the identity every one of them shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from operators.core import PROJECT_GROUP

CRDS = Path(__file__).resolve().parent.parent / "crds"


def crd(plural: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CRDS / f"{plural}.{PROJECT_GROUP}.yaml").read_text())
    return loaded


def version(plural: str) -> dict[str, Any]:
    """The CRD's one version: a second would need a conversion the operators do not have."""
    (only,) = crd(plural)["spec"]["versions"]
    assert isinstance(only, dict)
    return only


def spec_schema(plural: str) -> dict[str, Any]:
    schema: dict[str, Any] = version(plural)["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def check_identity(plural: str, kind: str, api_version: str) -> None:
    """The names the models use, and cluster scope: the DeviceTaintRules such an object owns are
    cluster-scoped too."""
    document = crd(plural)
    assert document["metadata"]["name"] == f"{plural}.{PROJECT_GROUP}"
    names = document["spec"]["names"]
    assert (document["spec"]["group"], names["kind"], names["plural"]) == (PROJECT_GROUP, kind, plural)
    assert document["spec"]["scope"] == "Cluster"
    assert f"{PROJECT_GROUP}/{version(plural)['name']}" == api_version
