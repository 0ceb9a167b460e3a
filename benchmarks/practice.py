"""The ladder's pace while practice games are played (issue 26, item 3:
practice games "never slowing the ladder").

* **The service** (``make_app``, what ``referee serve`` runs) in this
  process, on loopback, with ``bot_policy`` allowing 127.0.0.0/8 (as
  ``--bot-networks 127.0.0.0/8``) and one validation game per submission.
  Competition *ladder* is opened: its ladder plays in the service's process
  as the service runs it (a :class:`~referee.service.ladder_work.LadderWork`),
  4 teams and a house bot at tables of 2, concurrency 2. Competition
  *practice* is never opened: its 2 teams ask for practice games against
  its house bot, each again as soon as its last one ended (so one waits in
  the queue while the other plays: the service plays one at a time).
* **Bots**: sample-bot processes (greedy and random, instant), the
  ladder's on two, the practice competition's on two others, so a practice
  game's bots take nothing of the ladder's bot processes (a team's bot runs
  elsewhere, a container or its own server; what is measured is the
  referee's side).
* **Windows** of ``--window`` seconds (after a warm-up), in turn: *alone*
  (no practice game asked), *process* (the flood, each game in a child
  process at nice 19: :class:`~referee.service.practice.PracticeProcess`),
  *alone*, *thread* (the same flood played the old way, for comparison
  only: the same job by :func:`referee.service.practice_worker.play` in a
  thread of the service at nice 19, sharing its GIL), *alone*, ... for
  ``--rounds`` rounds. The ladder's games/s in each flood window over the
  mean of the *alone* windows on either side (the machine's drift falls out
  of that ratio); the medians per mode, and the practice games finished in
  each window (a window with none measured nothing).

    python benchmarks/practice.py [--window 30] [--rounds 2] [--warmup 10] [--json]

``--json`` prints the figures as one JSON object on the last line.

Measured on the 2-core machine shared with other work (load average 8 to
17 during the run, several engineers' test suites beside it; pure-Python
engine; 2026-12-02, at cff4733): ``--window 20 --rounds 4``.
The ladder alone 2.4-5.1 games/s (the machine's drift). During the flood,
over the alone windows on either side: **process 1.17x** (median; windows
1.19, 1.14, 0.89, 1.41), 2-5 practice games finished per 20 s window;
**thread 0.89x** (0.85, 0.89, 0.88, 1.06), 8-12 practice games per window.
Read: with the child process the ladder's pace is within the noise of its
pace alone (no window below 0.89, three above 1); with the thread it was
below in three of four. The child at nice 19 also gets less CPU on a busy
machine than the thread did (its priority holds for all of it, its start-up
included), so practice games wait longer when the machine is loaded: the
ladder first, as asked. The test suite's flood had read 0.47-0.84x for the
thread earlier, on the same machine at another load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from referee import engine_status  # noqa: E402
from referee.bots import free_port  # noqa: E402
from referee.bots.netpolicy import AddressPolicy, parse_networks  # noqa: E402
from referee.service.practice import NICE, Ending  # noqa: E402
from referee.service.practice_worker import PracticeJob, play  # noqa: E402
from referee.service.store import ServiceDB  # noqa: E402
from referee.web import Settings, make_app  # noqa: E402
from referee.web.app_state import ROOM  # noqa: E402

LEAGUE = """\
[tournament]
name = "{name}"
seed = 5
table_size = 2
schedule = "adaptive"
concurrency = 2

[stop]
max_games = 10000000

[timeouts]
move_ms = 2000

[ladder]
concurrency = 2

[[bots]]
name = "house"
url = "{house}"
"""


def start_bot(kind: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port("127.0.0.1")
    proc = subprocess.Popen(
        [sys.executable, "-m", f"sample_bots.{kind}", "--port", str(port), "--log-level", "WARNING"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, f"http://127.0.0.1:{port}"


async def wait_up(session: aiohttp.ClientSession, url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            async with session.get(url + "/") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"bot at {url} never answered")
        await asyncio.sleep(0.2)


def thread_job(job: PracticeJob) -> Any:
    """The old way (for the measurement only): the job played in a thread
    of the service at nice 19, its event loop of its own, the GIL shared."""

    async def run() -> Ending:
        box: dict[str, Any] = {}

        def main() -> None:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
            box["outcome"] = asyncio.run(play(job))

        th = threading.Thread(target=main, name="practice-thread", daemon=True)
        th.start()
        await asyncio.to_thread(th.join)
        return Ending(outcome=box.get("outcome"), returncode=0)

    return run()


class Bench:
    def __init__(self, base: str, session: aiohttp.ClientSession, admin: str) -> None:
        self.base, self.http, self.admin = base, session, admin

    def auth(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    async def competition(self, name: str, house: str) -> int:
        async with self.http.post(
            f"{self.base}/api/competitions",
            headers=self.auth(self.admin),
            json={"name": name, "league": LEAGUE.format(name=name, house=house)},
        ) as r:
            assert r.status == 201, await r.text()
            return int((await r.json())["id"])

    async def team(self, cid: int, name: str, url: str) -> tuple[int, str]:
        async with self.http.post(
            f"{self.base}/api/competitions/{cid}/teams", json={"name": name}, headers=self.auth(self.admin)
        ) as r:
            body = await r.json()
        tid, token = int(body["id"]), str(body["token"])
        async with self.http.put(
            f"{self.base}/api/competitions/{cid}/teams/{tid}/bot", json={"url": url}, headers=self.auth(token)
        ) as r:
            assert r.status == 201, await r.text()
            sid = (await r.json())["id"]
        while True:
            async with self.http.get(
                f"{self.base}/api/competitions/{cid}/teams/{tid}/submissions/{sid}", headers=self.auth(token)
            ) as r:
                status = (await r.json())["submission"]["status"]
            if status == "accepted":
                return tid, token
            assert status != "refused", f"{name}'s bot was refused"
            await asyncio.sleep(0.2)

    async def games(self, cid: int) -> int:
        async with self.http.get(f"{self.base}/api/competitions/{cid}") as r:
            return int((await r.json())["games"])


async def flood(
    bench: Bench, cid: int, tid: int, token: str, stop: asyncio.Event, finished: list[float]
) -> None:
    """Ask for a practice game, wait for its end, ask again, until `stop`."""
    url = f"{bench.base}/api/competitions/{cid}/teams/{tid}/practice"
    while not stop.is_set():
        async with bench.http.post(url, json={"opponents": ["house:house"]}, headers=bench.auth(token)) as r:
            if r.status != 202:
                await asyncio.sleep(0.5)
                continue
            pid = (await r.json())["id"]
        while True:  # the game asked for ends (a window's end lets it end, to leave the next window quiet)
            await asyncio.sleep(0.25)
            async with bench.http.get(f"{url}/{pid}", headers=bench.auth(token)) as r:
                game = await r.json()
            if game["status"] not in ("queued", "playing"):
                if game["status"] == "finished":
                    finished.append(time.monotonic())
                else:
                    print(f"  practice game {pid} {game['status']}: {game['error']}", file=sys.stderr)
                break


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    bots = [start_bot(k) for k in ("greedy", "random", "greedy", "random")]
    tmp = tempfile.TemporaryDirectory()
    runner: web.AppRunner | None = None
    try:
        db_path = Path(tmp.name) / "service.sqlite"
        db = ServiceDB(db_path)
        admin = db.ensure_admin_token()
        db.close()
        assert admin is not None
        policy = AddressPolicy(allowed=parse_networks("127.0.0.0/8"))
        app = make_app(
            db_path,
            Settings(
                bot_policy=policy, validation_games=1, practice_per_hour=1_000_000, submissions_per_window=100
            ),
        )
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        port = free_port("127.0.0.1")
        await web.TCPSite(runner, "127.0.0.1", port).start()
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            for _, url in bots:
                await wait_up(session, url)
            bench = Bench(base, session, admin)
            (ladder_greedy, ladder_random), (practice_greedy, practice_random) = (
                [u for _, u in bots[:2]],
                [u for _, u in bots[2:]],
            )
            ladder = await bench.competition("ladder", ladder_greedy)
            for i, url in enumerate((ladder_greedy, ladder_random, ladder_greedy, ladder_random)):
                await bench.team(ladder, f"team{i}", url)
            practice = await bench.competition("practice", practice_greedy)
            askers = [
                await bench.team(practice, f"p{i}", url)
                for i, url in enumerate((practice_greedy, practice_random))
            ]
            async with session.post(
                f"{base}/api/competitions/{ladder}/open", json={"concurrency": 2}, headers=bench.auth(admin)
            ) as r:
                assert r.status == 202, await r.text()
            print(engine_status())
            print(
                f"ladder under way; warm-up {args.warmup:.0f} s; windows of {args.window:.0f} s", flush=True
            )
            await asyncio.sleep(args.warmup)
            queue = app[ROOM].practice
            process_job = queue.run_job
            plan = ["alone"]
            for _ in range(args.rounds):
                plan += ["process", "alone", "thread", "alone"]
            windows: list[dict[str, Any]] = []
            for mode in plan:
                stop = asyncio.Event()
                finished: list[Any] = []
                tasks = []
                if mode != "alone":
                    queue.run_job = process_job if mode == "process" else thread_job  # type: ignore[method-assign]
                    tasks = [
                        asyncio.create_task(flood(bench, practice, tid, token, stop, finished))
                        for tid, token in askers
                    ]
                    await asyncio.sleep(1)  # the first game under way
                start, t0 = await bench.games(ladder), time.monotonic()
                await asyncio.sleep(args.window)
                end, t1 = await bench.games(ladder), time.monotonic()
                stop.set()
                await asyncio.gather(*tasks)  # the games asked for end before the next window
                row = {
                    "mode": mode,
                    "games_per_s": (end - start) / (t1 - t0),
                    "practice_games": sum(t0 <= t <= t1 for t in finished),
                }
                windows.append(row)
                print(
                    f"{mode:>8}: ladder {row['games_per_s']:6.2f} games/s; "
                    f"practice games finished {row['practice_games']}; load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            queue.run_job = process_job  # type: ignore[method-assign]
    finally:
        if runner is not None:
            await runner.cleanup()
        for proc, _ in bots:
            proc.terminate()
        for proc, _ in bots:
            proc.wait(10)
        tmp.cleanup()
    ratios: dict[str, list[float]] = {"process": [], "thread": []}
    for i, w in enumerate(windows):
        if w["mode"] == "alone":
            continue
        around = statistics.mean([windows[i - 1]["games_per_s"], windows[i + 1]["games_per_s"]])
        w["ratio"] = w["games_per_s"] / around if around else float("nan")
        ratios[w["mode"]].append(w["ratio"])
    print()
    for mode, values in ratios.items():
        print(
            f"ladder's pace during a flood of practice games ({mode}), over its pace alone: "
            f"{statistics.median(values):.2f}x (windows: {', '.join(f'{v:.2f}' for v in values)})"
        )
    return {
        "windows": windows,
        "median_process": statistics.median(ratios["process"]),
        "median_thread": statistics.median(ratios["thread"]),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", type=float, default=30.0, help="seconds per window")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (process, alone, thread, alone)")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds of ladder before the first window")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = ap.parse_args()
    report = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
