"""How many of a container bot's lines land on the move they were printed
for (issue 26, item 5), with the bot's own marks against the daemon's
timestamps, in the same run.

One bot image (``tests/support/programs/sdk_talker.py`` on the SDK: on every
``/act`` it prints three lines naming the request, on stdout, stderr and
from a thread) plays as two seats of each game: one as it is (the SDK marks
its requests, ``BOT_OUTPUT_MARKS``) and one with the variable dropped (an
SDK copy from before the marks: the referee places its lines by the
daemon's timestamps). A third seat is the greedy sample bot. Each line is
then found in the log split by :func:`referee.diagnostics.output_by_request`
and counted as on its own move, on a later one, on an earlier one (never
expected) or on none. ``--load N`` runs N busy processes meanwhile (a
loaded machine is where timestamps go wrong).

    python benchmarks/output_placement.py [--games 5] [--load 0] [--runtime runsc] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from protocol import Timeouts  # noqa: E402
from referee.bots.images.baseimage import build_bot_image, build_image  # noqa: E402
from referee.bots.sandbox.container import ContainerBot  # noqa: E402
from referee.bots.sandbox.docker_daemon import (  # noqa: E402
    check_runtime,
    cleanup_containers,
    docker_client,
    set_runtime,
)
from referee.diagnostics import output_by_request  # noqa: E402
from referee.match import play_match  # noqa: E402
from referee.record import steps  # noqa: E402
from referee.replay import read as read_replay  # noqa: E402

IMAGE = "referee-talkers:local"
DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY sdk_talker.py /app/sdk_talker.py
CMD ["python", "/app/sdk_talker.py"]
"""
LINE = re.compile(r"^(?:turn \d+ of|stderr|thread) (\S+)$", re.M)


def _number(request_id: str) -> int:
    return int(request_id.rsplit(".", 1)[1])


def count(log: Path, replay: Path, seat: int, game_id: str) -> dict[str, int]:
    """Where the seat's lines went: {"own", "later", "earlier", "none", "requests", "requests_exact"}."""
    asked = [
        s.line.request_id
        for s in steps(read_replay(replay))
        if s.line.seat == seat and s.line.by != "skipped"
    ]
    outputs = output_by_request([log], game_id, cap=1 << 20)
    tally = {"own": 0, "later": 0, "earlier": 0, "none": 0, "requests": len(asked), "requests_exact": 0}
    for request_id, text in outputs.items():
        for named in LINE.findall(text):
            key = (
                "own"
                if named == request_id
                else "later"
                if _number(request_id) > _number(named)
                else "earlier"
            )
            tally[key] += 1
    for request_id in asked:
        text = outputs.get(request_id, "")
        named = LINE.findall(text)
        tally["requests_exact"] += named.count(request_id) == 3 == len(named)
    tally["none"] = (
        3 * len(asked) - tally["own"] - tally["later"] - tally["earlier"]
    )  # e.g. past the game's end
    return tally


async def run(games: int) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        marks = ContainerBot(IMAGE, out_dir=out, name="marks")
        stamps = ContainerBot(IMAGE, out_dir=out, name="timestamps", env={"TALKER_NO_MARKS": "1"})
        greedy = ContainerBot(build_bot_image("greedy"), out_dir=out, name="greedy")
        played: list[tuple[list[ContainerBot], Path, str]] = []
        try:
            async with marks, stamps, greedy:
                for g in range(games):
                    bots = [marks, stamps, greedy] if g % 2 == 0 else [stamps, marks, greedy]
                    replay = out / f"g{g}.jsonl.gz"
                    await play_match(
                        bots,
                        seed=100 + g,
                        names=[b.name for b in bots],
                        game_id=f"g{g}",
                        timeouts=Timeouts(move_ms=5000),
                        replay=replay,
                    )
                    played.append((bots, replay, f"g{g}"))
            # the containers are stopped: their logs are complete (the pump may lag behind a game)
            for bots, replay, game_id in played:
                for seat, bot in enumerate(bots[:2]):
                    t = count(bot.log_path, replay, seat, game_id)
                    into = totals.setdefault(bot.name, dict.fromkeys(t, 0))
                    for k, v in t.items():
                        into[k] += v
        finally:
            cleanup_containers({"referee.out": str(out.resolve())})
    return totals


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=int, default=5)
    p.add_argument("--load", type=int, default=0, help="busy processes running meanwhile")
    p.add_argument("--runtime", default=None, help="the containers' runtime (default: the daemon's)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    client = docker_client()
    if a.runtime:
        check_runtime(a.runtime, client)
        set_runtime(a.runtime)
    greedy = build_bot_image("greedy", client)
    build_image(
        client,
        IMAGE,
        DOCKERFILE,
        {"sdk_talker.py": ROOT / "tests" / "support" / "programs" / "sdk_talker.py"},
        buildargs={"BASE": greedy},
        base_id=str(client.images.get(greedy).id),
    )
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.load)]
    try:
        totals = asyncio.run(run(a.games))
    finally:
        for b in burners:
            b.kill()
            b.wait()
    for name, t in totals.items():
        lines = t["own"] + t["later"] + t["earlier"] + t["none"]
        print(
            f"{name:>10}: lines on their own move {t['own']}/{lines} = {100 * t['own'] / lines:.1f} %"
            f" (later {t['later']}, earlier {t['earlier']}, on none {t['none']});"
            f" moves with exactly their lines {t['requests_exact']}/{t['requests']}"
            f" = {100 * t['requests_exact'] / t['requests']:.1f} %"
        )
    m, s = totals["marks"], totals["timestamps"]
    ratio = (m["own"] / max(1, sum(m[k] for k in ("own", "later", "earlier", "none")))) / max(
        1e-9, s["own"] / max(1, sum(s[k] for k in ("own", "later", "earlier", "none")))
    )
    print(f"ratio of shares on their own move, marks / timestamps: {ratio:.2f}")
    if a.json:
        print(json.dumps({"totals": totals, "ratio": ratio, "load": a.load, "runtime": a.runtime}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
