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

    python benchmarks/rush.py [--n 24] [--workers 2] [--quick] [--json] [--one-node-only]

``--quick``: 6 uploads. ``--json`` prints every figure as one JSON object on
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
import json
import shutil
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


def one_run(scratch: Path, name: str, batch: Any, workers: int, **settings: Any) -> dict[str, Any]:
    db_path = scratch / f"{name}.sqlite"
    verdicts, wall, site, used = asyncio.run(rush(db_path, batch, workers=workers, **settings))
    bad = wrong(verdicts)
    if bad:
        raise SystemExit(f"{name}: wrong verdicts: {bad}")
    out = figures(verdicts, wall)
    out["workers"] = used
    where = getattr(site, "where", {})
    if where:
        out["builds_per_node"] = sorted(
            {
                n: sum(1 for (_, step), m in where.items() if step == "build" and m == n)
                for n in set(where.values())
            }.values(),
            reverse=True,
        )
    remove_instance_images(docker_client(), site.instance)
    return out


def show(name: str, f: dict[str, Any], base: dict[str, Any] | None) -> None:
    ratio = (
        f" ({f['p50'] / base['p50']:.2f}× p50, {f['per_minute'] / base['per_minute']:.2f}× per minute)"
        if base
        else ""
    )
    print(
        f"{name:>10}: {f['n']} submissions, upload to verdict p50 {f['p50'] / 1000:.1f} s, "
        f"p95 {f['p95'] / 1000:.1f} s, max {f['max'] / 1000:.1f} s; {f['per_minute']:.1f} a minute; "
        f"{f['accepted']} accepted, {f['refused']} refused{ratio}",
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=24, help="submissions in the burst (one team each)")
    ap.add_argument("--workers", type=int, default=2, help="admission workers (both runs)")
    ap.add_argument("--quick", action="store_true", help="6 submissions (for CI)")
    ap.add_argument(
        "--one-node-only", action="store_true", help="the baseline alone (no Ray, no second daemon)"
    )
    ap.add_argument("--json", action="store_true", help="every figure as one JSON object on the last line")
    ns = ap.parse_args()
    n = 6 if ns.quick else ns.n
    if not ns.one_node_only and (why := missing()) is not None:
        raise SystemExit(f"two nodes cannot run here: {why} (--one-node-only measures the baseline)")
    scratch = Path(tempfile.mkdtemp(prefix="rfrush-", dir="/tmp"))
    result: dict[str, Any] = {"n": n, "workers": ns.workers}
    try:
        image = build_bot_image("greedy", docker_client())
        batch = uploads(n, scratch / "uploads", image, images=max(1, n // 6), broken=max(2, n // 8))
        kinds = {k: sum(u.what == k for u in batch) for k in ("source", "image", "crash", "syntax")}
        result["uploads"] = kinds
        print(f"{n} uploads: {kinds}; {ns.workers} admission workers", flush=True)
        t0 = time.perf_counter()
        result["one_node"] = one = one_run(scratch, "one", batch, ns.workers)
        show("one node", one, None)
        if not ns.one_node_only:
            (scratch / "registry").mkdir()
            (scratch / "d2").mkdir()
            registry = RegistryProcess(scratch / "registry")
            daemon = SecondDaemon(scratch / "d2")
            registry.start()
            try:
                daemon.start()
                with ray_head(scratch / "ray") as cluster:
                    TwoNodes(cluster, None, daemon, registry).add_second()
                    two = one_run(
                        scratch,
                        "two",
                        batch,
                        ns.workers,
                        executor="ray",
                        executor_address=cluster.address,
                        executor_workers=1,
                        executor_registry=registry.address,
                    )
                result["two_nodes"] = two
                show("two nodes", two, one)
            finally:
                daemon.stop()
                registry.stop()
        result["seconds"] = round(time.perf_counter() - t0, 1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if ns.json:
        last = result.get("two_nodes") or result["one_node"]  # the figure the goal is about
        flat = {**result, "p50": last["p50"], "p95": last["p95"]}
        print(json.dumps(flat, sort_keys=True))


if __name__ == "__main__":
    main()
