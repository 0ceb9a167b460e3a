"""Container bots on a Ray cluster of one node and of two (issue 28), in the same run.

Two figures, each with the one-node figure as its baseline:

- **games/s**: the league of ``tests/cluster`` (three container bots, two
  images, 2-player tables, 6 games a round, concurrency 4) played by
  :class:`~referee.tournament.executors.RayExecutor` with a registry, on a
  cluster of one node, then of two (the order alternates over
  ``--repeats``); the time counts from the first game to the last (the bots
  started on the first node at their handshake, on the second at their
  first game there).
- **image distribution**: each image pushed to a registry that never saw
  it (:meth:`~referee.bots.cluster.registry.Registry.push`), then made present on a
  node (:meth:`~referee.bots.cluster.registry.ImageCache.ensure`): on the one node,
  which shares the coordinator's Docker daemon, a look-up; on the second
  node, a pull by digest into a daemon that never had it.

Both nodes are on this machine (``ray.cluster_utils.Cluster``, one CPU
each), the second one's containers on a second ``dockerd`` with its own
bridge; the registry is Debian's ``docker-registry`` on loopback: the rig of
``tests/cluster`` (``tests/support/cluster.py``). So two nodes share
this machine's cores: the games/s ratio shows the cluster's overhead and its
scheduling, not what a second machine would add. Needs root, a running
Docker daemon, ``docker-registry``, ``ip`` and Ray (``pip install -e '.[ray]'``).

    python benchmarks/cluster.py [--rounds 4] [--repeats 2] [--quick] [--json]

``--quick``: one round (6 games), one repeat. ``--json`` prints the figures as
one JSON object on the last line.
"""

from __future__ import annotations

import argparse
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

from referee import engine_status  # noqa: E402
from referee.bots.cluster.registry import ImageCache, Registry  # noqa: E402
from referee.bots.images.baseimage import build_bot_image  # noqa: E402
from referee.bots.sandbox.docker_daemon import docker_client  # noqa: E402
from referee.tournament.executors import RayExecutor  # noqa: E402
from tests.support.cluster import (  # noqa: E402
    RegistryProcess,
    SecondDaemon,
    TwoNodes,
    has_link,
    league_text,
    missing,
    play_league,
    ray_head,
)

BOTS = ("greedy", "tactician")
MB = 1024**2


def distribute(
    images: dict[str, str], registry: str, second: SecondDaemon, scratch: Path
) -> list[dict[str, Any]]:
    """Each image pushed to the (new) registry, then present on each node: seconds and sizes."""
    client = docker_client()
    reg = Registry(registry)
    head = ImageCache(client, index=scratch / "head-cache.json")
    node2 = ImageCache(second.client(), index=scratch / "second-cache.json")
    rows: list[dict[str, Any]] = []
    for bot in BOTS:
        t0 = time.perf_counter()
        pinned = reg.push(client, images[bot])
        push = time.perf_counter() - t0
        t0 = time.perf_counter()
        head.ensure(pinned)
        lookup = time.perf_counter() - t0
        t0 = time.perf_counter()
        node2.ensure(pinned)
        pull = time.perf_counter() - t0
        assert node2.pulls == len(rows) + 1, "the second node had the image already"
        rows.append(
            {
                "image": bot,
                "size_mb": round(int(client.images.get(pinned.image_id).attrs["Size"]) / MB, 1),
                "push_s": round(push, 3),
                "one_node_s": round(push + lookup, 3),
                "two_nodes_s": round(push + pull, 3),
                "lookup_s": round(lookup, 4),
                "pull_s": round(pull, 3),
            }
        )
    return rows


def games_per_s(cluster: Any, registry: str, text: str, out: Path) -> dict[str, Any]:
    """One league on the cluster as it is: games/s from the first game to the
    last, and the run's whole time (the bots' handshakes and the executor's
    start and close included)."""
    t0 = time.perf_counter()
    ex = RayExecutor(address=cluster.address, workers=1, registry=registry)
    t = play_league(text, out, ex)
    return {
        "games": t.played,
        "seconds": round(t.play_seconds, 2),
        "games_per_s": round(t.played / t.play_seconds, 3),
        "run_s": round(time.perf_counter() - t0, 2),
        "per_node": sorted(ex.played.values(), reverse=True),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4, help="rounds of the league (6 games each)")
    ap.add_argument("--repeats", type=int, default=2, help="one-node and two-node runs, alternated")
    ap.add_argument("--quick", action="store_true", help="one round, one repeat")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.repeats = 1, 1
    why = missing()
    if why is not None:
        print(f"benchmarks/cluster.py cannot run here: {why}", file=sys.stderr)
        sys.exit(2)
    print(engine_status())
    client = docker_client()
    t0 = time.perf_counter()
    images = {bot: build_bot_image(bot, client) for bot in BOTS}
    print(f"sample images ready (built or reused) in {time.perf_counter() - t0:.1f} s")

    scratch = Path(tempfile.mkdtemp(prefix="rfcb-", dir="/tmp"))  # short: a unix socket's path
    had_docker0 = has_link("docker0")
    (scratch / "registry").mkdir()
    (scratch / "d2").mkdir()
    registry = RegistryProcess(scratch / "registry")
    second = SecondDaemon(scratch / "d2")
    report: dict[str, Any] = {"rounds": args.rounds, "repeats": args.repeats}
    try:
        registry.start()
        second.start()
        rows = distribute(images, registry.address, second, scratch)
        report["distribution"] = rows
        print(f"\nimage distribution (registry at {registry.address}, empty at first):")
        print(f"{'image':>10} {'MB':>6} {'push s':>7} {'1 node s':>9} {'2 nodes s':>10} {'x 1 node':>9}")
        for r in rows:
            r["ratio"] = round(r["two_nodes_s"] / r["one_node_s"], 2)
            print(
                f"{r['image']:>10} {r['size_mb']:>6} {r['push_s']:>7.2f} {r['one_node_s']:>9.2f} "
                f"{r['two_nodes_s']:>10.2f} {r['ratio']:>8}x"
            )
        print(
            "(1 node: the push and a look-up, the node sharing the coordinator's daemon; "
            "2 nodes: the push and a pull by digest on the second node; the second image's base "
            "layers are the first's, sent once)"
        )

        text = league_text(images, rounds=args.rounds, name="cluster bench")
        runs: dict[str, list[dict[str, Any]]] = {"one": [], "two": []}
        with ray_head(scratch / "ray") as cluster:
            nodes = TwoNodes(cluster, None, second, registry)
            for k in range(args.repeats):
                order = ("one", "two") if k % 2 == 0 else ("two", "one")
                for which in order:
                    if which == "two" and nodes.second is None:
                        nodes.add_second()
                    if which == "one" and nodes.second is not None:
                        cluster.remove_node(nodes.second)
                        nodes.second = None
                    row = games_per_s(cluster, registry.address, text, scratch / f"out-{which}-{k}")
                    runs[which].append(row)
                    print(
                        f"{which} node(s): {row['games']} games in {row['seconds']} s = "
                        f"{row['games_per_s']} games/s (the run: {row['run_s']} s), per node {row['per_node']}"
                    )
        one = statistics.median(r["games_per_s"] for r in runs["one"])
        two = statistics.median(r["games_per_s"] for r in runs["two"])
        one_run = statistics.median(r["run_s"] for r in runs["one"])
        two_run = statistics.median(r["run_s"] for r in runs["two"])
        report["games"] = {
            "one_node": runs["one"],
            "two_nodes": runs["two"],
            "one_node_games_per_s": round(one, 3),
            "two_nodes_games_per_s": round(two, 3),
            "ratio": round(two / one, 3),
            "run_ratio": round(two_run / one_run, 3),
        }
        print(
            f"\ngames/s (median of {args.repeats}): one node {one:.2f}, two nodes {two:.2f} = "
            f"{two / one:.2f}x the one node's; the whole run {one_run:.1f} s and {two_run:.1f} s = "
            f"{two_run / one_run:.2f}x (both nodes on this machine's cores; on two nodes the second "
            "node's bots start at their first game there, inside the games' time)"
        )
    finally:
        second.stop()
        registry.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        if has_link("docker0") != had_docker0:
            print("warning: the machine's docker0 bridge changed during the run", file=sys.stderr)
    if args.json:
        print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
