"""The suite's results: read from ginkgo's JUnit report, kept as a baseline, laid side by side."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
# ginkgo names a testcase "[It] <text> [<labels>]", and then the component version constraints:
# "[It] ... rolling update [KubeletMinVersion:1.33] [sig-node, DRA, ...] [kubelet: [>=1.33]]".
_CONSTRAINTS = re.compile(r"( \[[\w.-]+: \[[^\[\]]*\]\])+$")
_LABELS = re.compile(r" \[[^\[\]]*\]$")


def spec_name(testcase_name: str) -> str:
    """A spec's text as ``-list-tests`` prints it: without ginkgo's node type, label list and
    version constraints (the suite's own [Feature:...] words are part of the text and stay)."""
    name = testcase_name.strip().removeprefix("[It] ")
    return _LABELS.sub("", _CONSTRAINTS.sub("", name))


def read_junit(path: Path) -> dict[str, str]:
    """spec -> passed, failed or skipped; the [DRA] specs only (not the suite's set-up nodes)."""
    if not path.is_file():
        return {}
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = spec_name(case.get("name", ""))
        if "[DRA]" not in name:
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = FAILED
        elif case.find("skipped") is not None or case.get("status") in ("skipped", "pending"):
            outcome = SKIPPED
        else:
            outcome = PASSED
        # A spec ginkgo reports twice (a flake retried) counts by its worst run.
        if outcomes.get(name) != FAILED:
            outcomes[name] = outcome
    return outcomes


def merged(*passes: dict[str, str]) -> dict[str, str]:
    """One result per spec over several passes (the full selection, the PodGroup pass): where a
    spec ran in one pass and was skipped in another, the pass where it ran counts."""
    result: dict[str, str] = {}
    for outcomes in passes:
        for spec, outcome in outcomes.items():
            if result.get(spec, SKIPPED) == SKIPPED:
                result[spec] = outcome
    return result


def write_baseline(path: Path, version: str, selection: str, outcomes: dict[str, str], profile: str) -> None:
    document = {
        "kubernetes": version,
        "profile": profile,
        "selection": selection,
        "controllers": "in-tree (kube-controller-manager)",
        "date": _today(),
        "specs": dict(sorted(outcomes.items())),
    }
    path.write_text(json.dumps(document, indent=1) + "\n")


def read_baseline(path: Path) -> dict[str, str]:
    specs: dict[str, str] = json.loads(path.read_text())["specs"]
    return specs


def _today() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class Table:
    upstream: dict[str, str]
    ours: dict[str, str]

    def specs(self) -> list[str]:
        return sorted(set(self.upstream) | set(self.ours))

    def regressions(self) -> list[str]:
        """Specs that pass with the in-tree controllers and fail with ours (or did not run with ours
        although ours ran)."""
        if not self.ours:
            return []
        return [
            spec
            for spec in self.specs()
            if self.upstream.get(spec) == PASSED and self.ours.get(spec, FAILED) == FAILED
        ]

    def counts(self, outcomes: dict[str, str]) -> dict[str, int]:
        return {kind: sum(1 for v in outcomes.values() if v == kind) for kind in (PASSED, FAILED, SKIPPED)}

    def as_json(self) -> dict[str, Any]:
        return {
            "upstream": self.counts(self.upstream),
            "ours": self.counts(self.ours),
            "specs": {
                spec: {"upstream": self.upstream.get(spec, ""), "ours": self.ours.get(spec, "")}
                for spec in self.specs()
            },
            "regressions": self.regressions(),
        }

    def markdown(self, version: str, selection: str, date: str, seconds: dict[str, float]) -> str:
        def cell(outcomes: dict[str, str], spec: str) -> str:
            return outcomes.get(spec, "-")

        def summary(name: str, outcomes: dict[str, str]) -> str:
            if not outcomes:
                return f"{name}: not run"
            counts = self.counts(outcomes)
            took = f", {seconds[name] / 60:.0f} min" if name in seconds else ""
            return (
                f"{name}: {counts[PASSED]} passed, {counts[FAILED]} failed, {counts[SKIPPED]} skipped{took}"
            )

        lines = [
            f"Upstream's DRA e2e suite (k8s.io/kubernetes {version} test/e2e/dra),"
            f" selection `{selection}`, {date}.",
            "",
            f"- {summary('upstream', self.upstream)} (in-tree controllers)",
            f"- {summary('ours', self.ours)} (dra-operators, installed from the manifests)",
            "",
            "| spec | in-tree | dra-operators |",
            "|---|---|---|",
        ]
        lines += [
            f"| {spec} | {cell(self.upstream, spec)} | {cell(self.ours, spec)} |" for spec in self.specs()
        ]
        return "\n".join(lines) + "\n"
