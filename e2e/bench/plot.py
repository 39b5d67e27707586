"""The scale benchmark's picture: memory and CPU against the number of pods in the cluster, our
operators beside kube-controller-manager (its growth over its own baseline, and the CPU of its
in-tree DRA controllers: its CPU with them less its CPU without)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a build machine

import matplotlib.pyplot as plt

OPERATORS = ("resourceclaim", "devicetaint", "bindingattacher")
KCM = "kube-controller-manager"


def _size(row: Mapping[str, Any]) -> int:
    return int(str(row["tier"]).removeprefix("N="))


def scale_series(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Each line of the picture as (N, value) points, from the rows of ``results.json``."""
    series: dict[str, list[tuple[int, float]]] = {}

    def add(name: str, size: int, value: float | None) -> None:
        if value is not None:
            series.setdefault(name, []).append((size, value))

    for row in sorted((r for r in rows if r["benchmark"] == "scale"), key=_size):
        size, up, ours = _size(row), row["upstream"], row["ours"]
        for op in OPERATORS:
            add(f"rss:{op} (peak)", size, ours.get(f"{op}_peak_rss_mib"))
            add(f"cpu:{op}", size, ours.get(f"{op}_cpu_s_total"))
        add(f"rss:{KCM}, all its controllers (growth over its baseline)", size, up.get(f"{KCM}_growth_mib"))
        add(f"rss:{KCM} in-tree DRA share (growth with less without)", size, up.get("in_tree_dra_growth_mib"))
        add(f"cpu:{KCM} in-tree DRA share", size, up.get("in_tree_dra_cpu_s_total"))
    return series


def plot_scale(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    series = scale_series(rows)
    figure, (rss, cpu) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, points in sorted(series.items()):
        axes, label = (rss, name[4:]) if name.startswith("rss:") else (cpu, name[4:])
        style = "--" if KCM in name else "-"
        axes.plot([n for n, _ in points], [value for _, value in points], style, marker="o", label=label)
    rss.set_title("memory")
    rss.set_ylabel("MiB")
    cpu.set_title("CPU over the whole workload")
    cpu.set_ylabel("CPU-seconds")
    for axes in (rss, cpu):
        axes.set_xlabel("pods in the cluster (N)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle("make bench BENCH=scale: 10 % template pods, 2 % on shared claims, the rest plain")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
