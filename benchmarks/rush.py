"""A deadline rush (issue 37): N submissions at once, on one node and on two, in the same run.

N teams each upload once, all at the same moment, to the classroom service
(``make_app``, what ``referee serve`` runs) on 127.0.0.1: Python source zips
(the kit's shape), ``docker save`` archives of the greedy sample's image, and
a few broken uploads (a bot that crashes at start, a source that does not
compile). Each is timed from the moment its upload is sent to its verdict
(the service's own record of it); the figures are p50, p95 and max of those
times and the submissions a minute over the burst (first upload to last
verdict). Every verdict is checked: the good ones accepted, the broken ones
refused for their own reason.

- **one node** (the baseline): the service as it runs by default, every
  build and check on this machine's Docker daemon;
- **two nodes**: ``--executor ray --registry``: the builds and checks on a
  Ray cluster of two nodes, the second with a Docker daemon of its own, the
  images through a registry by digest (the rig of ``tests/cluster``,
  ``tests/support/cluster.py``).

Both runs have the same number of admission workers (``--workers``). On this
machine the two nodes share its two cores: the ratio shows what the cluster
costs, not what a second machine gives. On real machines run it with the
nodes there (the same script: ``--address`` of the cluster and
``--registry``). Needs root, Docker, ``docker-registry``, ``ip`` and Ray.

A shared machine's speed drifts by 10-20% from one half-minute to the next,
so the two runs are made ``--repeat`` times (3), one after the other, in
turns (one-two, two-one, ...), the cluster up all along (idle in the
one-node runs: 2% of this machine); each pair gives a ratio and the figure
is their median (``ratio_per_minute``, ``ratio_p50``). Each setup's figures
pool its runs' submissions. Beside the times, each run's CPU: the whole
machine's busy seconds over the burst (service, daemons, bots, Ray,
registry) a submission.

    python benchmarks/rush.py [--n 24] [--workers 2] [--repeat 3] [--quick] [--json] [--one-node-only]

``--quick``: 6 uploads, one pair. ``--json`` prints every figure as one JSON object on
the last line (times in ms: ``p50``, ``p95``, ``max``), with each run's
``phases``: where the submissions' time went, each phase's p50, p95 and max
(``queue``: upload to a worker taking it; ``build``; ``check``; ``total``: taken
to verdict; on two nodes also ``node_build``, ``push``, ``fetch`` (the node's
pull before the check, none when it built the image), ``node_check``,
``transfer`` (Ray and the bytes) and ``pull`` (an accepted image brought home)).
The same figures are in the service's log, a line a verdict
(``referee.service.pipeline``, INFO). Before the burst the service is ready as
before a deadline: its source builds' base images made where they run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from referee.bots.images.baseimage import build_bot_image  # noqa: E402
from referee.bots.sandbox.docker_daemon import docker_client  # noqa: E402
from tests.support.cluster import RegistryProcess, SecondDaemon, TwoNodes, missing, ray_head  # noqa: E402
from tests.support.containers import remove_instance_images  # noqa: E402
from tests.support.rush import figures, rush, uploads, wrong  # noqa: E402


class Runs:
    """One setup's runs: their verdicts, walls and CPU seconds pooled."""

    def __init__(self, name: str, settings: dict[str, Any]) -> None:
        self.name = name
        self.settings = settings
        self.verdicts: list[Any] = []
        self.wall = 0.0
        self.cpu = 0.0
        self.workers = 0
        self.builds: dict[str, int] = {}
        self.each: list[dict[str, Any]] = []

    def run(self, scratch: Path, batch: Any, workers: int) -> dict[str, Any]:
        db_path = scratch / f"{self.name}-{len(self.each)}.sqlite"
        verdicts, wall, site, used, cpu = asyncio.run(rush(db_path, batch, workers=workers, **self.settings))
        remove_instance_images(docker_client(), site.instance)
        bad = wrong(verdicts)
        if bad:
            raise SystemExit(f"{self.name}: wrong verdicts: {bad}")
        self.verdicts += verdicts
        self.wall += wall
        self.cpu += cpu
        self.workers = used
        for (_, step), node in getattr(site, "where", {}).items():
            if step == "build":
                self.builds[node] = self.builds.get(node, 0) + 1
        f = figures(verdicts, wall)
        f["cpu_s_per_submission"] = round(cpu / len(verdicts), 2)
        self.each.append(f)
        return f

    def pooled(self) -> dict[str, Any]:
        out = figures(self.verdicts, self.wall)
        out["workers"] = self.workers
        out["runs"] = len(self.each)
        out["cpu_s_per_submission"] = round(self.cpu / len(self.verdicts), 2)
        if self.builds:
            out["builds_per_node"] = sorted(self.builds.values(), reverse=True)
        return out


def show(name: str, f: dict[str, Any]) -> None:
    print(
        f"{name:>10}: {f['n']} submissions, upload to verdict p50 {f['p50'] / 1000:.1f} s, "
        f"p95 {f['p95'] / 1000:.1f} s, max {f['max'] / 1000:.1f} s; {f['per_minute']:.1f} a minute; "
        f"{f['accepted']} accepted, {f['refused']} refused; "
        f"{f['cpu_s_per_submission']:.2f} CPU s a submission",
        flush=True,
    )
    print(
        " " * 12
        + "phases p50/max: "
        + ", ".join(
            f"{name} {p['p50'] / 1000:.1f}/{p['max'] / 1000:.1f} s" for name, p in f["phases"].items()
        ),
        flush=True,
    )


@contextlib.contextmanager
def two_nodes(scratch: Path) -> Any:
    """A registry, a second dockerd and a Ray cluster of two nodes (the second on
    that daemon): the service settings of a run on them."""
    (scratch / "registry").mkdir()
    (scratch / "d2").mkdir()
    registry = RegistryProcess(scratch / "registry")
    daemon = SecondDaemon(scratch / "d2")
    registry.start()
    try:
        daemon.start()
        with ray_head(scratch / "ray") as cluster:
            TwoNodes(cluster, None, daemon, registry).add_second()
            yield {
                "executor": "ray",
                "executor_address": cluster.address,
                "executor_workers": 1,
                "executor_registry": registry.address,
            }
    finally:
        daemon.stop()
        registry.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=24, help="submissions in the burst (one team each)")
    ap.add_argument("--workers", type=int, default=2, help="admission workers (both runs)")
    ap.add_argument("--repeat", type=int, default=None, help="pairs of runs, in turns (default 3; --quick 1)")
    ap.add_argument("--quick", action="store_true", help="6 submissions, one pair (for CI)")
    ap.add_argument(
        "--one-node-only", action="store_true", help="the baseline alone (no Ray, no second daemon)"
    )
    ap.add_argument("--json", action="store_true", help="every figure as one JSON object on the last line")
    ns = ap.parse_args()
    n = 6 if ns.quick else ns.n
    repeat = ns.repeat if ns.repeat is not None else (1 if ns.quick else 3)
    if repeat < 1:
        raise SystemExit("--repeat must be at least 1")
    if not ns.one_node_only and (why := missing()) is not None:
        raise SystemExit(f"two nodes cannot run here: {why} (--one-node-only measures the baseline)")
    scratch = Path(tempfile.mkdtemp(prefix="rfrush-", dir="/tmp"))
    result: dict[str, Any] = {"n": n, "workers": ns.workers, "repeat": repeat}
    try:
        image = build_bot_image("greedy", docker_client())
        batch = uploads(n, scratch / "uploads", image, images=max(1, n // 6), broken=max(2, n // 8))
        kinds = {k: sum(u.what == k for u in batch) for k in ("source", "image", "crash", "syntax")}
        result["uploads"] = kinds
        print(f"{n} uploads: {kinds}; {ns.workers} admission workers; {repeat} pair(s) of runs", flush=True)
        t0 = time.perf_counter()
        with contextlib.ExitStack() as stack:
            one = Runs("one node", {})
            setups = [one]
            if not ns.one_node_only:
                setups.append(Runs("two nodes", stack.enter_context(two_nodes(scratch))))
            pairs: list[dict[str, float]] = []
            for r in range(repeat):
                turn = setups if r % 2 == 0 else setups[::-1]
                got = {runs.name: runs.run(scratch, batch, ns.workers) for runs in turn}
                line = ", ".join(
                    f"{name} {f['per_minute']:.1f}/min p50 {f['p50'] / 1000:.1f} s" for name, f in got.items()
                )
                if len(got) == 2:
                    a, b = got["one node"], got["two nodes"]
                    pairs.append(
                        {
                            "ratio_per_minute": round(b["per_minute"] / a["per_minute"], 3),
                            "ratio_p50": round(b["p50"] / a["p50"], 3),
                        }
                    )
                    line += f": {pairs[-1]['ratio_per_minute']:.2f}× per minute"
                print(f"  pair {r + 1}: {line}", flush=True)
        result["one_node"] = one.pooled()
        show("one node", result["one_node"])
        if pairs:
            result["two_nodes"] = setups[1].pooled()
            result["pairs"] = pairs
            result["ratio_per_minute"] = round(statistics.median(p["ratio_per_minute"] for p in pairs), 3)
            result["ratio_p50"] = round(statistics.median(p["ratio_p50"] for p in pairs), 3)
            show("two nodes", result["two_nodes"])
            print(
                f"two nodes against one, median of {len(pairs)} pair(s): "
                f"{result['ratio_per_minute']:.2f}× submissions a minute, {result['ratio_p50']:.2f}× p50 "
                "(goal on one machine: no worse than one node)",
                flush=True,
            )
        result["seconds"] = round(time.perf_counter() - t0, 1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if ns.json:
        last = result.get("two_nodes") or result["one_node"]  # the figure the goal is about
        flat = {**result, "p50": last["p50"], "p95": last["p95"]}
        print(json.dumps(flat, sort_keys=True))


if __name__ == "__main__":
    main()
