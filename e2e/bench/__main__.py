"""``python -m e2e.bench [NAME ...]``: run the benchmarks and print ratios (see the package docs)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import asdict
from pathlib import Path

from devcluster.constants import REPO_ROOT
from e2e.bench.env import Result

BENCHMARKS = ("resourceclaim", "devicetaint", "poolstatus", "bindingattacher", "taintselector")
# Run only when named: the cluster-scale workload takes most of an hour (BENCH=scale).
ON_REQUEST = ("scale",)


def _available() -> list[str]:
    return [name for name in BENCHMARKS + ON_REQUEST if (Path(__file__).parent / f"{name}.py").is_file()]


def _print(results: list[Result]) -> None:
    width = max([22, *(len(key) for r in results for key in (*r.upstream, *r.ours))])
    print(f"\n{'benchmark':<16} {'tier':<16} {'metric':<{width}} {'upstream':>10} {'ours':>10} {'ratio':>7}")
    for result in results:
        keys = sorted(set(result.upstream) | set(result.ours))
        for key in keys:
            ratio = result.ratio(key)
            up = result.upstream.get(key, "-")
            print(
                f"{result.benchmark:<16} {result.tier:<16} {key:<{width}} {up:>10} "
                f"{result.ours.get(key, '-'):>10} {f'{ratio:.2f}x' if ratio is not None else '-':>7}"
            )
        for note in result.notes:
            print(f"{'':<34}note: {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench", description=__doc__)
    parser.add_argument(
        "names", nargs="*", choices=[*_available(), []][:-1] or None, help="benchmarks to run"
    )
    args = parser.parse_args(argv)
    results: list[Result] = []
    for name in args.names or [name for name in _available() if name not in ON_REQUEST]:
        print(f"==> {name}", flush=True)
        try:
            results.extend(importlib.import_module(f"e2e.bench.{name}").run())
        except Exception as err:  # one broken workload must not lose the others' numbers
            failed = Result(name, "failed")
            failed.notes.append(f"{type(err).__name__}: {err}"[:500])
            results.append(failed)
        _print(results)
    out = REPO_ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    # Keep earlier results of workloads not run this time, so partial runs add up: a benchmark
    # that failed replaces all of its rows, one that ran replaces the tiers it ran.
    path = out / "results.json"
    broken = {r.benchmark for r in results if r.tier == "failed"}
    ran = {(r.benchmark, r.tier) for r in results}
    kept = (
        [
            r
            for r in json.loads(path.read_text())
            if r["benchmark"] not in broken and (r["benchmark"], r["tier"]) not in ran
        ]
        if path.is_file()
        else []
    )
    rows = kept + [asdict(r) for r in results]
    path.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"\nwritten to {path}")
    if any(r.benchmark == "scale" for r in results):
        from e2e.bench.plot import plot_scale

        print(f"plotted {plot_scale(rows, out / 'scale.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
