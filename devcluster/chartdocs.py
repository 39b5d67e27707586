"""The chart README's table of values, made from ``values.yaml`` (the defaults) and
``values.schema.json`` (the types and descriptions), so the three cannot drift:
``python -m devcluster chart-readme`` rewrites the table, and a unit test fails when it is stale."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .constants import REPO_ROOT

CHART = REPO_ROOT / "charts" / "dra-operators"
BEGIN = "<!-- values table: python -m devcluster chart-readme -->"
END = "<!-- end of values table -->"
# Helm's own key, for subcharts; not one of the chart's values.
HELM_KEYS = frozenset({"global"})


@dataclass(frozen=True)
class Row:
    key: str
    kind: str
    default: str
    description: str


def _kind(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(choice)}`" for choice in schema["enum"])
    kind = schema.get("type", "any")
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _rows(prefix: str, schema: dict[str, Any], values: Any) -> Iterator[Row]:
    properties: dict[str, Any] = schema.get("properties", {})
    if "$ref" in schema or not properties:
        yield Row(
            prefix,
            _kind(schema),
            json.dumps(values, separators=(", ", ": ")),
            str(schema.get("description", "")),
        )
        return
    present = values if isinstance(values, dict) else {}
    unset = sorted(set(properties) - set(present) - HELM_KEYS)
    if unset:
        raise ValueError(
            f"values.yaml gives no default for {', '.join(f'{prefix}.{n}' if prefix else n for n in unset)}"
        )
    for name, value in present.items():
        key = f"{prefix}.{name}" if prefix else name
        if name not in properties:
            raise ValueError(f"values.yaml sets {key}, which values.schema.json does not describe")
        yield from _rows(key, properties[name], value)


def rows(chart: Path = CHART) -> list[Row]:
    schema = json.loads((chart / "values.schema.json").read_text())
    values = yaml.safe_load((chart / "values.yaml").read_text())
    return list(_rows("", schema, values))


def table(chart: Path = CHART) -> str:
    lines = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for row in rows(chart):
        description = row.description.replace("|", "\\|")
        lines.append(f"| `{row.key}` | {row.kind} | `{row.default}` | {description} |")
    return "\n".join(lines) + "\n"


def with_table(readme: str, rendered: str) -> str:
    before, begin, rest = readme.partition(BEGIN)
    _, end, after = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the chart README lacks the markers {BEGIN!r} ... {END!r}")
    return f"{before}{BEGIN}\n{rendered}{END}{after}"


def write_readme(chart: Path = CHART) -> Path:
    readme = chart / "README.md"
    readme.write_text(with_table(readme.read_text(), table(chart)))
    return readme
