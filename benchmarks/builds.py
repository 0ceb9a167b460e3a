"""A benchmark in both builds, in the same run: the compiled engine against
its own Python source (``REFEREE_PURE=1``) as the baseline (issue 16).

Runs ``benchmarks/NAME.py --json ARGS`` ``--rounds`` times in each build,
interleaved (pure first in even rounds, compiled first in odd ones, so a
drift of the shared machine falls on both), and prints the median of every
number of their JSON reports side by side, with compiled / pure.

    python benchmarks/builds.py engine --rounds 3 -- --steps 50000 --repeats 1
    python benchmarks/builds.py overhead --rounds 3 -- --pairs 21
    python benchmarks/builds.py strength --rounds 1 -- --pairs searcher:tactician --games 200 --deadline-ms 50

``--json`` prints ``{"pure": {...}, "compiled": {...}}`` (the medians) on the
last line. Without a compiled build both columns are the source: the first
lines say which engine each column ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BUILDS = {"pure": {"REFEREE_PURE": "1"}, "compiled": {"REFEREE_PURE": ""}}


def _env(build: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(BUILDS[build])
    return env


def _flat(obj: Any, prefix: str = "") -> dict[str, float]:
    """Every number of a JSON value, by dotted path (short lists by index;
    longer ones, per-pair rows and the like, are left out)."""
    out: dict[str, float] = {}
    if isinstance(obj, list) and len(obj) > 8:
        return out
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            out[key] = float(v)
        else:
            out.update(_flat(v, key))
    return out


def run_once(name: str, build: str, args: list[str]) -> dict[str, float]:
    cmd = [sys.executable, str(HERE / f"{name}.py"), "--json", *args]
    done = subprocess.run(cmd, env=_env(build), capture_output=True, text=True)
    if done.returncode not in (0, 1):  # strength.py exits 1 when an interval includes 50%
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{name} ({build}) exited {done.returncode}")
    lines = done.stdout.strip().splitlines()
    print(f"  {build}: {lines[-2] if len(lines) > 1 else ''}"[:160], file=sys.stderr, flush=True)
    return _flat(json.loads(lines[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=["engine", "overhead", "tournament", "strength"])
    ap.add_argument("--rounds", type=int, default=3, help="runs of each build, interleaved (median taken)")
    ap.add_argument("--json", action="store_true", help="the medians as one JSON object on the last line")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    ns = ap.parse_args(argv[:cut])
    args = argv[cut + 1 :]  # after --: the benchmark's own options
    for build in BUILDS:
        line = subprocess.run(
            [sys.executable, "-c", "import referee; print(referee.engine_status())"],
            env=_env(build),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(f"{build}: {line}")
    runs: dict[str, list[dict[str, float]]] = {b: [] for b in BUILDS}
    for r in range(ns.rounds):
        order = list(BUILDS) if r % 2 == 0 else list(BUILDS)[::-1]
        for build in order:
            print(f"round {r + 1}/{ns.rounds}: {ns.name} ({build})", file=sys.stderr, flush=True)
            runs[build].append(run_once(ns.name, build, args))
    medians = {
        b: {k: statistics.median(rs[k] for rs in runs[b] if k in rs) for k in runs[b][0]} for b in BUILDS
    }
    width = max(len(k) for k in medians["pure"])
    print(f"{'median of ' + str(ns.rounds):<{width}} {'pure':>14} {'compiled':>14} {'c/p':>7}")
    for k, p in medians["pure"].items():
        c = medians["compiled"].get(k)
        ratio = f"{c / p:7.2f}" if c is not None and p else "      -"
        print(f"{k:<{width}} {p:>14,.3f} {c if c is not None else float('nan'):>14,.3f} {ratio}")
    if ns.json:
        print(json.dumps(medians, sort_keys=True))


if __name__ == "__main__":
    main()
