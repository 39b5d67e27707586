"""The chart's README and Artifact Hub metadata say what the chart is: the values table is the one
values.yaml and values.schema.json make, and the annotations name the chart's own CRDs, image,
licence and version."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import chartdocs

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "dra-operators"
CHANGE_KINDS = {"added", "changed", "deprecated", "removed", "fixed", "security"}


def _project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def _annotation(name: str) -> Any:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    value = chart["annotations"][f"artifacthub.io/{name}"]
    assert isinstance(value, str), f"annotations must be strings, {name} is {value!r}"
    return yaml.safe_load(value)


def test_the_readme_values_table_is_the_one_values_and_schema_make() -> None:
    readme = (CHART / "README.md").read_text()
    assert chartdocs.with_table(readme, chartdocs.table()) == readme, "run make chart-readme"


def test_every_value_has_a_default_and_a_description() -> None:
    rows = chartdocs.rows()
    keys = [row.key for row in rows]
    assert "operators.bindingattacher.drivers" in keys
    assert "networkPolicy.metricsNamespaceSelector" in keys
    assert len(keys) == len(set(keys))
    assert not [row.key for row in rows if not row.description], "describe them in values.schema.json"


def test_a_value_without_a_schema_or_a_default_is_refused(tmp_path: Path) -> None:
    for name in ("values.yaml", "values.schema.json"):
        (tmp_path / name).write_bytes((CHART / name).read_bytes())
    values = tmp_path / "values.yaml"
    values.write_text(values.read_text() + "surprise: 1\n")
    with pytest.raises(ValueError, match=r"values\.yaml sets surprise"):
        chartdocs.rows(tmp_path)
    values.write_text((CHART / "values.yaml").read_text().replace('priorityClassName: ""\n', ""))
    with pytest.raises(ValueError, match="no default for priorityClassName"):
        chartdocs.rows(tmp_path)


def test_artifact_hub_names_the_chart_crds() -> None:
    crds = []
    for path in sorted((CHART / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        (storage,) = [v["name"] for v in crd["spec"]["versions"] if v["storage"]]
        crds.append((crd["spec"]["names"]["kind"], storage, crd["metadata"]["name"]))
    listed = _annotation("crds")
    assert [(c["kind"], c["version"], c["name"]) for c in listed] == crds
    assert all(c["displayName"] and c["description"] for c in listed)


def test_artifact_hub_names_the_image_licence_and_version() -> None:
    version = _project()["version"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert _annotation("images") == [
        {"name": "dra-operators", "image": f"{values['image']['repository']}:{version}"}
    ]
    assert _annotation("license") == _project()["license"]
    assert _annotation("prerelease") == ("-" in version)
    assert _annotation("operator") is True
    changes = _annotation("changes")
    assert changes
    assert {change["kind"] for change in changes} <= CHANGE_KINDS
    assert all(change["description"] for change in changes)
    assert all(link["name"] and link["url"].startswith("https://") for link in _annotation("links"))
