"""The classroom service with a term's data (issue 37): pages at a million games.

A service database and data folder are generated at a term's size, then the
real service (``referee serve`` on loopback, a subprocess) is started on
them and every page and API read a teacher or a student uses is timed.

* **Generated, not played**: 300 teams (``ServiceDB.add_teams``), 3,000
  submissions (10 a team, accepted URL bots), a competition in its final
  phase with its ladder (finished at the freeze) and its final (finished),
  and 1,000,000 recorded games: 85% in the ladder's ``tournament.sqlite``,
  10% in the final's, 5% as practice games (4 games a row of
  ``practice_games``). The rows are those a real run writes
  (:class:`referee.tournament.store.Store`'s tables, the ladder's entries,
  one entry per submission, 300 in play at any moment), bulk inserted with
  ``executemany`` in one transaction; each game's ``result`` is one of a
  handful of games really played by the runner first (greedy sample bots,
  4-player tables), its names and places changed, so a row weighs what a
  real one does (the latencies of every move included). Every game names
  its replay file as the runner does, but **replay files are written only
  for the sample of games the benchmark opens** (a real term keeps one per
  game: about 5 KB each, compressed); likewise only the sampled practice
  games have a folder.
* **Watched, as the service watches a term**: the ladder's and the final's
  ratings are applied once by the service's own table
  (:class:`referee.tournament.results.RunRatings`) over all their games but
  the last ``CHECKPOINT_GAMES`` - 1, which leaves the checkpoints a service
  that watched the term leaves in the runs' databases; the rest are
  recorded after, and each run is then ended as the service ends a finished
  run (:func:`referee.service.runs.seal_ratings`: a checkpoint at its last
  game, ``ladder_seal_s`` and ``final_seal_s``). So the first view after
  the service starts reads the checkpoints and replays no game (before the
  seal it replayed the games since the last checkpoint, about 1,000).
  This takes TrueSkill's time (about 0.6 ms a game on a quiet machine, 3-5
  ms on a loaded one: 45 minutes for a million games), timed as
  ``ladder_ratings_s`` and ``final_ratings_s``. ``--watched N`` applies the
  table over the last N games before the checkpoint only, as if they were
  all: a stand-in, whose standings are not a replay's but whose cost (the
  same bots, their bounded histories, the games after the checkpoint) is.
* **Measured**: p50/p95 over ``--requests`` GETs (one at a time, after one
  warm-up whose time is ``first``) of the leaderboard (the final, and the
  ladder's), the competition's JSON, a bot page (the ladder's and the
  final's) at its first, middle and last page of games and its JSON (its
  first 100 games: ``?page=1&per_page=100``, as a client pages it), the
  run's games list (API, first page), a replay page and its JSON, the
  CSV, a team's page, its live part, its diagnostics, its practice list and
  a practice replay, and the admin's home, competition, team and team
  diagnostics pages. The live stream's fan-out: ``--watchers`` event
  streams (``?view=live``, as the page opens them; each from its own
  address through ``--trusted-proxies 127.0.0.1``, as behind a proxy),
  then a game recorded into the latest run: the time until every watcher
  has the update (the streams are let idle for the byte budget's gap
  first, so the figure is the fan-out, not the rate limit). The databases'
  size per game; ``referee backup`` (while the service runs) and
  ``referee restore`` times; the service's peak RSS (``VmHWM``).
* **Baseline, same run**: the same generator at a competition of 4 teams,
  8 submissions and 40 games, served and measured the same way; each
  figure's ratio is ``x_empty``.

    python benchmarks/service_scale.py [--teams 300] [--submissions 3000] [--games 1000000]
                                       [--watchers 500] [--requests 20] [--watched N] [--quick] [--json]
                                       [--keep DIR] [--only PAGE,...]

``--quick``: 30 teams, 300 submissions, 20,000 games, 100 watchers, 10
requests a page (a few minutes). ``--json`` prints every figure as one JSON
object on the last line (times in ms). ``--keep DIR`` generates into DIR and
keeps it; run again with the same DIR, what it holds is served again as it is
(no generating). ``--only PAGE,...`` times those pages alone (no fan-out,
backup or restore), to iterate on one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gzip
import json
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tournament import league as sample_league  # noqa: E402

from referee.bots.factory import BotSpec  # noqa: E402
from referee.service.runs import check_league_text, seal_ratings  # noqa: E402
from referee.service.store import ServiceDB  # noqa: E402
from referee.tournament.league import League  # noqa: E402
from referee.tournament.ratings import Table  # noqa: E402
from referee.tournament.results import CHECKPOINT_GAMES, RunRatings  # noqa: E402
from referee.tournament.runner import Tournament, write_outputs  # noqa: E402
from referee.tournament.store import TOURNAMENT_DB, Entry, Store, open_ladder_store  # noqa: E402

#: Shares of the games: the ladder, the final, practice.
SHARES = (0.85, 0.10, 0.05)
#: Games a practice game holds (a duplicate deal's rotations at a 4-player table).
PRACTICE_GAMES = 4
TABLE = 4
#: Versions of its bot a team submits (submissions / teams when given).
LEAGUE_TOML = """[tournament]
name = "term"
seed = 5
table_size = 4
rounds = 1
concurrency = 4

[timeouts]
move_ms = 2000
"""


# ------------------------------------------------------------ generating


@dataclass
class Template:
    """A game really played: its result as JSON (a dict) and its replay file's lines."""

    result: dict[str, Any]
    replay: list[bytes]


def play_templates(tmp: Path, games: int = 8) -> list[Template]:
    """A few real games by the runner (greedy sample bots as commands, 4 seats, replays kept)."""
    out = tmp / "templates"
    t = Tournament(sample_league(games, 4), out, progress=False, replays=True, log=lambda m: None)
    asyncio.run(t.run())
    found = []
    with sqlite3.connect(out / TOURNAMENT_DB) as db:
        for result, replay in db.execute("SELECT result, replay FROM games ORDER BY idx"):
            lines = gzip.decompress((out / replay).read_bytes()).splitlines()
            found.append(Template(json.loads(result), lines))
    return found


@dataclass
class Sizes:
    teams: int
    submissions: int
    games: int

    @property
    def ladder(self) -> int:
        return int(self.games * SHARES[0])

    @property
    def final(self) -> int:
        return int(self.games * SHARES[1])

    @property
    def practice(self) -> int:
        """Practice games (rows), each of :data:`PRACTICE_GAMES` games."""
        return max(1, (self.games - self.ladder - self.final) // PRACTICE_GAMES)


@dataclass
class Generated:
    db_path: Path
    admin_token: str
    team_token: str
    team_id: int
    cid: int
    ladder_run: int
    final_run: int
    ladder_bot: str
    final_bot: str
    ladder_games: int
    final_games: int
    sample: list[int]
    practice_id: int
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)


def _result(t: Template, names: Sequence[str], rng: random.Random) -> str:
    r = dict(t.result)
    order = list(range(1, len(names) + 1))
    rng.shuffle(order)
    r["names"] = list(names)
    r["places"] = order
    r["game_id"] = f"{rng.getrandbits(96):024x}"
    return json.dumps(r, separators=(",", ":"))


def _write_replay(out: Path, rel: str, t: Template) -> None:
    """The template's replay as it was played (its names too: the states it
    recorded hash them, so a replay renamed would no longer check)."""
    path = out / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(b"\n".join(t.replay) + b"\n", 1))


def _games(
    store: Store,
    out: Path,
    n: int,
    seats_at: Any,
    templates: list[Template],
    rng: random.Random,
    sample: set[int],
    t0: float,
    start: int = 0,
) -> None:
    """Games `start` to `n` - 1 into `store` in one transaction (4 rotations a
    deal); a replay file for those in `sample`."""
    rows = []
    faults = []
    for i in range(start, n):
        deal = i // TABLE
        base = seats_at(deal)
        rot = i % TABLE
        names = base[rot:] + base[:rot]
        t = templates[i % len(templates)]
        rel = f"replays/game-{i:06d}.jsonl.gz"
        if i in sample:
            _write_replay(out, rel, t)
        if i % 97 == 0:  # about 1% of the games with a fault
            faults.append((i, 0, names[0], "timeout", 3, "no answer within 2000 ms", 12.5))
        rows.append(
            (
                i,
                deal // 100,
                deal,
                rot,
                1000 + deal,
                json.dumps(names),
                f"{i:024x}",
                json.dumps(t.result["places"]),
                0,
                "[]",
                int(t.result["turns"]),
                _result(t, names, rng),
                rel,
                t0 + i,
            )
        )
    db = store.db
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO games (idx, round, meeting, rotation, deal_seed, seats, game_id, places,"
        " adjudicated, disqualified, turns, result, replay, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    db.executemany(
        "INSERT INTO faults (game_idx, seat, bot, kind, turn, detail, overrun_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
        faults,
    )
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'game_seats'").fetchone():
        # the bots' index of games, as record_game writes it (a store of a referee before it has none)
        db.executemany(
            "INSERT OR IGNORE INTO game_seats (bot, game_idx) VALUES (?, ?)",
            ((b, r[0]) for r in rows for b in json.loads(r[5])),
        )
    db.execute("COMMIT")


def watch(league: League, out: Path, *, ladder: bool, upto: int, stand_in: int) -> None:
    """What the service that watched a run leaves in it: its table applied
    over the `upto` games recorded (its checkpoints written); `stand_in`
    (not 0): over the last `stand_in` of them only, taken as if they were
    all (the standings are then not a replay's, their cost is)."""
    ratings = RunRatings(league, ladder=ladder)
    if stand_in and upto > stand_in:
        ratings.next = upto - stand_in
        ratings.table.applied = ratings.next - 1
    ratings.update(out)


def generate(
    folder: Path, sizes: Sizes, templates: list[Template], seed: int = 5, stand_in: int = 0
) -> Generated:
    """The service database and data folder at `sizes` under `folder`."""
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    db_path = folder / "service.sqlite"
    db = ServiceDB(db_path)
    admin = db.ensure_admin_token()
    assert admin is not None
    comp = db.add_competition("term", LEAGUE_TOML)
    cid = comp.id
    made = db.add_teams(cid, [f"team{i:03d}" for i in range(sizes.teams)])
    teams = [t for t, _ in made]
    versions = max(1, sizes.submissions // sizes.teams)
    now = time.time() - 90 * 86400
    sub_rows = []
    for v in range(versions):
        for t in teams:
            sub_rows.append(
                (
                    t.id,
                    "url",
                    f"http://10.0.{t.id // 250}.{t.id % 250 + 1}:8000",
                    f"v{v + 1}",
                    now + v * 86400 + t.id,
                    "accepted",
                    f"10.0.{t.id // 250}.{t.id % 250 + 1}",
                )
            )
    with db.transaction() as c:
        c.executemany(
            "INSERT INTO submissions (team_id, kind, url, note, created_at, status, address)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            sub_rows,
        )
    subs: dict[tuple[int, int], int] = {}  # (team id, version) -> submission id
    for sid, tid, note in db.db.execute("SELECT id, team_id, note FROM submissions"):
        subs[(int(tid), int(note[1:]) - 1)] = int(sid)
    timings["service_rows_s"] = time.perf_counter() - t_start
    league = check_league_text(LEAGUE_TOML)
    league_json = msgspec.json.encode(league).decode()
    data = db.data_dir / f"competition-{cid}"

    # ---- the ladder: one entry per submission, versions taking over in turn
    t1 = time.perf_counter()
    ladder_out = data / "ladder-1"
    ladder_out.mkdir(parents=True)
    lad = db.begin_run(cid, out_dir=str(ladder_out), league_json=league_json, total_games=0, kind="ladder")
    assert not isinstance(lad, str)
    store = open_ladder_store(ladder_out / TOURNAMENT_DB)
    store.set_meta("league", league_json)
    store.set_meta("name", "term")
    per_version = max(1, sizes.ladder // versions)
    with store.db:
        for v in range(versions):
            for t in teams:
                sid = subs[(t.id, v)]
                spec = BotSpec(name=f"{t.name} v{v + 1}", url=sub_rows[0][2], address="10.0.0.1")
                store.put_entry(
                    Entry(
                        name=spec.name,
                        team=t.name,
                        submission=sid,
                        spec=spec,
                        mu0=25.0,
                        sigma0=8.333,
                        games0=0,
                        joined_at=now + v * 86400 + t.id,
                        first_index=v * per_version,
                        status="active" if v == versions - 1 else "retired",
                        reason=None if v == versions - 1 else "a newer version entered",
                        ended_at=None if v == versions - 1 else now + (v + 1) * 86400,
                        team_id=t.id,
                    )
                )
    names_v = [[f"{t.name} v{v + 1}" for t in teams] for v in range(versions)]
    sample_ladder = set(rng.sample(range(sizes.ladder), min(20, sizes.ladder)))

    def ladder_seats(deal: int) -> list[str]:
        v = min(versions - 1, deal * TABLE // per_version)
        return random.Random(deal).sample(names_v[v], TABLE)

    watched = max(0, sizes.ladder - CHECKPOINT_GAMES + 1)
    _games(store, ladder_out, watched, ladder_seats, templates, rng, sample_ladder, now)
    timings["ladder_s"] = time.perf_counter() - t1
    t_watch = time.perf_counter()
    watch(league, ladder_out, ladder=True, upto=watched, stand_in=stand_in)
    timings["ladder_ratings_s"] = time.perf_counter() - t_watch
    _games(store, ladder_out, sizes.ladder, ladder_seats, templates, rng, sample_ladder, now, watched)
    store.close()
    t_seal = time.perf_counter()
    seal_ratings(db, lad.id)  # what the service does as a run finishes: a checkpoint at its last game
    timings["ladder_seal_s"] = time.perf_counter() - t_seal
    db.end_run(lad.id, "finished")

    # ---- the final: each team's last version
    t2 = time.perf_counter()
    final_out = data / "final-2"
    final_out.mkdir(parents=True)
    last = names_v[-1]
    final_league = msgspec.structs.replace(
        league, bots=[BotSpec(name=n, url=sub_rows[0][2], address="10.0.0.1") for n in last]
    )
    final_json = msgspec.json.encode(final_league).decode()
    secrets = {n: subs[(t.id, versions - 1)] for n, t in zip(last, teams, strict=True)}
    fin = db.begin_run(
        cid,
        out_dir=str(final_out),
        league_json=final_json,
        total_games=sizes.final,
        kind="final",
        secrets_from=json.dumps(secrets),
    )
    assert not isinstance(fin, str)
    store = Store(final_out / TOURNAMENT_DB)
    store.set_meta("league", final_json)
    store.set_meta("name", "term")
    sample_final = set(rng.sample(range(sizes.final), min(20, sizes.final)))
    watched = max(0, sizes.final - CHECKPOINT_GAMES + 1)
    for begin, end in ((0, watched), (watched, sizes.final)):
        _games(
            store,
            final_out,
            end,
            lambda deal: random.Random(-deal - 1).sample(last, TABLE),
            templates,
            rng,
            sample_final,
            now,
            begin,
        )
        if begin == 0:
            t_watch = time.perf_counter()
            watch(final_league, final_out, ladder=False, upto=watched, stand_in=stand_in)
            timings["final_ratings_s"] = time.perf_counter() - t_watch
    store.close()
    # what the final writes at its end (its standings: the 300 bots, unrated here)
    write_outputs(final_out, Table(last, league.ratings).standings(), [])
    t_seal = time.perf_counter()
    seal_ratings(db, fin.id)
    timings["final_seal_s"] = time.perf_counter() - t_seal
    db.end_run(fin.id, "finished")
    timings["final_s"] = time.perf_counter() - t2
    db.set_phase(cid, "final")

    # ---- practice: rows, a folder for the one the benchmark opens
    t3 = time.perf_counter()
    team = teams[min(1, len(teams) - 1)]
    prac_rows = []
    for p in range(sizes.practice):
        who = teams[(p + 1) % len(teams)]  # the first row: the team the benchmark signs in as
        seats = [{"kind": "self", "name": f"{who.name} v{versions}", "pick": "self"}] + [
            {"kind": "house", "name": f"house{k}", "pick": f"house:house{k}", "house": f"house{k}"}
            for k in range(TABLE - 1)
        ]
        names = [s["name"] for s in seats]
        results = [
            {"index": g, "names": names[g:] + names[:g], "places": [1, 2, 3, 4], "seat": (-g) % TABLE}
            for g in range(PRACTICE_GAMES)
        ]
        prac_rows.append(
            (
                cid,
                who.id,
                json.dumps(seats),
                "finished",
                str(data / "practice" / f"game-{p + 1}"),
                now + p,
                now + p,
                now + p + 5,
                json.dumps(results),
            )
        )
    with db.transaction() as c:
        c.executemany(
            "INSERT INTO practice_games (competition_id, team_id, seats, status, out_dir, created_at,"
            " started_at, finished_at, results) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            prac_rows,
        )
    (practice_id,) = db.db.execute(
        "SELECT MAX(id) FROM practice_games WHERE team_id = ?", (team.id,)
    ).fetchone()
    pout = data / "practice" / f"game-{practice_id}"
    pout.mkdir(parents=True)
    pnames = json.loads(prac_rows[practice_id - 1][2])
    store = Store(pout / TOURNAMENT_DB)
    store.set_meta("league", league_json)
    _games(
        store,
        pout,
        PRACTICE_GAMES,
        lambda deal: [s["name"] for s in pnames],
        templates,
        rng,
        set(range(PRACTICE_GAMES)),
        now,
    )
    store.close()
    timings["practice_s"] = time.perf_counter() - t3
    team_token = db.new_team_token(team.id)
    db.close()
    return Generated(
        db_path=db_path,
        admin_token=admin,
        team_token=team_token,
        team_id=team.id,
        cid=cid,
        ladder_run=lad.id,
        final_run=fin.id,
        ladder_bot=f"{team.name} v{versions}",
        final_bot=f"{team.name} v{versions}",
        ladder_games=sizes.ladder,
        final_games=sizes.final,
        sample=sorted(sample_final),
        practice_id=int(practice_id),
        seconds=time.perf_counter() - t_start,
        timings={k: round(v, 2) for k, v in timings.items()},
    )


# -------------------------------------------------------------- measuring


def referee_cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from referee.cli import main; main()", *args]


def _pct(values: Sequence[float], p: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


class Server:
    """``referee serve`` on loopback over a generated folder."""

    def __init__(self, gen: Generated, port: int, log: Path) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            referee_cli(
                "serve",
                "--db",
                str(gen.db_path),
                "--port",
                str(port),
                "--trusted-proxies",
                "127.0.0.1/32",
            ),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        self.log = log

    async def wait(self, session: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"referee serve ended: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"{self.base}/") as r:
                    if r.status == 200:
                        return
            if time.monotonic() > deadline:
                raise RuntimeError("referee serve did not answer within 120 s")
            await asyncio.sleep(0.2)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pages(gen: Generated) -> dict[str, tuple[str, str]]:
    """Every read timed: name -> (who: public, team or admin; path)."""
    c, lr, fr = gen.cid, gen.ladder_run, gen.final_run
    lb, fb = gen.ladder_bot, gen.final_bot
    per_bot_ladder = max(1, gen.ladder_games * TABLE // 3000)
    last = 10**6  # a page past the last shows the last
    mid = max(1, per_bot_ladder // 40)
    idx = gen.sample[len(gen.sample) // 2]
    return {
        "leaderboard": ("public", f"/c/{c}"),
        "leaderboard_ladder": ("public", f"/c/{c}?run={lr}"),
        "competition_api": ("public", f"/api/competitions/{c}"),
        "bot_page_first": ("public", f"/c/{c}/bots/{lb}?run={lr}"),
        "bot_page_middle": ("public", f"/c/{c}/bots/{lb}?run={lr}&page={mid}"),
        "bot_page_last": ("public", f"/c/{c}/bots/{lb}?run={lr}&page={last}"),
        "bot_page_final": ("public", f"/c/{c}/bots/{fb}"),
        "bot_api": ("public", f"/api/competitions/{c}/bots/{fb}?page=1&per_page=100"),
        "games_api": ("public", f"/api/competitions/{c}/runs/{fr}/games?page=1&per_page=100"),
        "games_api_last": (
            "public",
            f"/api/competitions/{c}/runs/{fr}/games?page={max(1, -(-gen.final_games // 100))}&per_page=100",
        ),
        "replay_page": ("public", f"/c/{c}/runs/{fr}/games/{idx}"),
        "replay_api": ("public", f"/api/competitions/{c}/runs/{fr}/games/{idx}"),
        "standings_csv": ("public", f"/api/competitions/{c}/runs/{fr}/standings.csv"),
        "team_page": ("team", "/team"),
        "team_live": ("team", "/team/live"),
        "team_diagnostics": ("team", "/team/diagnostics"),
        "team_practice": ("team", "/team/practice"),
        "practice_replay": ("team", f"/team/practice/{gen.practice_id}?game=0&seat=0"),
        "admin_home": ("admin", "/admin"),
        "admin_competition": ("admin", f"/admin/c/{c}"),
        "admin_team": ("admin", f"/admin/c/{c}/teams/{gen.team_id}"),
        "admin_team_diagnostics": ("admin", f"/admin/c/{c}/teams/{gen.team_id}/diagnostics"),
    }


async def sign_in(session: aiohttp.ClientSession, base: str, path: str, token: str) -> None:
    async with session.post(
        f"{base}{path}", data={"token": token}, headers={"Origin": base}, allow_redirects=False
    ) as r:
        if r.status != 303:
            raise RuntimeError(f"POST {path}: {r.status} {(await r.text())[:300]}")


async def time_pages(base: str, gen: Generated, requests: int, only: Sequence[str] = ()) -> dict[str, Any]:
    jar = {who: aiohttp.CookieJar(unsafe=True) for who in ("public", "team", "admin")}
    sessions = {
        who: aiohttp.ClientSession(cookie_jar=j, timeout=aiohttp.ClientTimeout(total=1800))
        for who, j in jar.items()
    }
    try:
        await sign_in(sessions["team"], base, "/login", gen.team_token)
        await sign_in(sessions["admin"], base, "/admin/login", gen.admin_token)
        out: dict[str, Any] = {}
        for name, (who, path) in pages(gen).items():
            if only and name not in only:
                continue
            s = sessions[who]
            times = []
            size = 0
            for k in range(requests + 1):
                t0 = time.perf_counter()
                async with s.get(f"{base}{path}", allow_redirects=False) as r:
                    body = await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"GET {path}: {r.status} {body[:300]!r}")
                ms = (time.perf_counter() - t0) * 1000
                size = len(body)
                if k == 0:
                    first = ms
                else:
                    times.append(ms)
            out[name] = {
                "first": round(first, 1),
                "p50": round(_pct(times, 50), 1),
                "p95": round(_pct(times, 95), 1),
                "kb": round(size / 1024, 1),
            }
            print(
                f"  {name:24} p50 {out[name]['p50']:8.1f} ms  p95 {out[name]['p95']:8.1f} ms"
                f"  first {out[name]['first']:9.1f} ms  {out[name]['kb']:8.1f} KB",
                flush=True,
            )
        return out
    finally:
        for s in sessions.values():
            await s.close()


async def fan_out(base: str, gen: Generated, watchers: int) -> dict[str, Any]:
    """`watchers` live streams; a game recorded into the latest run; the time until all have it."""
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=None)
    )
    got: list[asyncio.Event] = [asyncio.Event() for _ in range(watchers)]
    first: list[asyncio.Event] = [asyncio.Event() for _ in range(watchers)]
    arrived: list[float] = [0.0] * watchers
    sizes: list[int] = [0] * watchers
    # what the update after the game recorded shows (its count of games): an update before it is not it
    want = [b""]

    async def watch(i: int) -> None:
        addr = f"10.{1 + i // 65000}.{(i // 250) % 250}.{i % 250 + 1}"
        async with session.get(
            f"{base}/api/competitions/{gen.cid}/events?view=live", headers={"X-Forwarded-For": addr}
        ) as r:
            if r.status != 200:
                raise RuntimeError(f"stream {i}: {r.status} {(await r.text())[:200]}")
            buffer = b""
            async for chunk in r.content.iter_any():
                buffer += chunk
                *events, buffer = buffer.split(b"\n\n")
                for e in events:
                    if not e.startswith(b"event: live"):
                        continue
                    if not first[i].is_set():
                        sizes[i] = len(e)
                        first[i].set()
                    elif want[0] and want[0] in e:
                        arrived[i] = time.perf_counter()
                        got[i].set()
                        return

    tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
    try:
        t_open = time.perf_counter()
        async with asyncio.timeout(600):
            await asyncio.gather(*(f.wait() for f in first))
        opened = time.perf_counter() - t_open
        # the byte budget's gap between two updates of a stream (Settings: 4 MiB/s, at least 1 s)
        gap = max(1.0, watchers * max(sizes) / (4 << 20))
        await asyncio.sleep(gap + 0.5)
        db = ServiceDB(gen.db_path)
        run = db.latest_run(gen.cid)
        db.close()
        assert run is not None
        store = Store(Path(run.out_dir) / TOURNAMENT_DB)
        (n,) = store.db.execute("SELECT MAX(idx) + 1 FROM games").fetchone()
        seats, played = store.db.execute("SELECT seats, result FROM games WHERE idx = 0").fetchone()
        names = json.loads(seats)
        want[0] = f'data-done="{int(n) + 1}"'.encode()
        t0 = time.perf_counter()
        store.record_game(
            index=int(n),
            round_=0,
            meeting=int(n),
            rotation=0,
            deal_seed=-1,
            seats=names,
            game_id=f"{n:024x}",
            places=list(range(1, len(names) + 1)),
            adjudicated=False,
            disqualified=[],
            turns=100,
            # a whole result (a game really played's): the pages that decode it read this one too
            result={**json.loads(played), "places": list(range(1, len(names) + 1)), "names": names},
            faults=[],
            replay=None,
        )
        t_recorded = time.perf_counter()
        store.close()
        async with asyncio.timeout(600):
            await asyncio.gather(*(g.wait() for g in got))
        delays = [(a - t_recorded) * 1000 for a in arrived]
        return {
            "watchers": watchers,
            "opened_ms": round(opened * 1000, 1),
            "live_part_kb": round(max(sizes) / 1024, 1),
            "record_ms": round((t_recorded - t0) * 1000, 1),
            "p50": round(_pct(delays, 50), 1),
            "p95": round(_pct(delays, 95), 1),
            "all": round(max(delays), 1),
        }
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.close()


def db_sizes(gen: Generated, games: int) -> dict[str, Any]:
    data = gen.db_path.parent / f"{gen.db_path.stem}-data"
    run_dbs = sum(p.stat().st_size for p in data.rglob(f"{TOURNAMENT_DB}*"))
    service = sum(p.stat().st_size for p in gen.db_path.parent.glob(f"{gen.db_path.name}*"))
    return {
        "service_db_mb": round(service / 1e6, 1),
        "run_dbs_mb": round(run_dbs / 1e6, 1),
        "bytes_per_game": round((run_dbs + service) / max(1, games)),
    }


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[3:])}: {done.stderr[-2000:]}")
    return round((time.perf_counter() - t0) * 1000, 1)


def measure(
    tmp: Path, label: str, sizes: Sizes, templates: Callable[[], list[Template]], args: argparse.Namespace
) -> dict[str, Any]:
    print(
        f"{label}: generating {sizes.teams} teams, {sizes.submissions} submissions, {sizes.games:,} games",
        flush=True,
    )
    saved = tmp / label / "generated.json"
    if args.keep and saved.exists():  # generated by an earlier run into --keep: served again as it is
        fields = json.loads(saved.read_text())
        gen = Generated(**{**fields, "db_path": Path(fields["db_path"])})
        print(f"  reused {saved.parent} (generated in {gen.seconds:.1f} s {gen.timings})", flush=True)
    else:
        gen = generate(tmp / label, sizes, templates(), stand_in=args.watched)
        saved.write_text(json.dumps({**dataclasses.asdict(gen), "db_path": str(gen.db_path)}))
        print(f"  generated in {gen.seconds:.1f} s {gen.timings}", flush=True)
    out: dict[str, Any] = {"generate_s": round(gen.seconds, 1), "generate": gen.timings}
    out["size"] = db_sizes(gen, sizes.games)
    server = Server(gen, free_port(), tmp / f"{label}-serve.log")
    try:

        async def go() -> None:
            async with aiohttp.ClientSession() as s:
                t0 = time.perf_counter()
                await server.wait(s)
                out["start_ms"] = round((time.perf_counter() - t0) * 1000, 1)
            out["pages"] = await time_pages(server.base, gen, args.requests, args.only)
            if args.only:
                return
            out["fan_out"] = await fan_out(server.base, gen, args.watchers)
            print(
                f"  fan-out to {args.watchers}: all in {out['fan_out']['all']} ms "
                f"(p50 {out['fan_out']['p50']} ms)",
                flush=True,
            )

        asyncio.run(go())
        if args.only:
            return out
        backup = tmp / f"{label}-backup"
        # a kept folder's earlier backup and restore are this script's own: made again, timed again
        shutil.rmtree(backup, ignore_errors=True)
        shutil.rmtree(tmp / f"{label}-restored", ignore_errors=True)
        out["backup_ms"] = timed(referee_cli("backup", "--db", str(gen.db_path), str(backup)))
        out["rss_peak_mb"] = peak_rss_mb(server.proc.pid)
    finally:
        server.close()
    out["restore_ms"] = timed(
        referee_cli("restore", "--db", str(tmp / f"{label}-restored" / "service.sqlite"), str(backup))
    )
    print(
        f"  backup {out['backup_ms']} ms, restore {out['restore_ms']} ms, peak RSS {out['rss_peak_mb']} MB, "
        f"{out['size']}",
        flush=True,
    )
    if not args.keep:
        shutil.rmtree(tmp / label, ignore_errors=True)
        shutil.rmtree(backup, ignore_errors=True)
        shutil.rmtree(tmp / f"{label}-restored", ignore_errors=True)
    return out


def ratios(big: dict[str, Any], empty: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, fig in big["pages"].items():
        base = empty["pages"][name]
        out[name] = {k: round(fig[k] / base[k], 2) if base[k] else None for k in ("p50", "p95")}
    if "fan_out" not in big:  # --only: pages alone
        return out
    for key in ("backup_ms", "restore_ms", "rss_peak_mb"):
        out[key] = round(big[key] / empty[key], 2) if empty[key] else None
    out["fan_out"] = (
        round(big["fan_out"]["all"] / empty["fan_out"]["all"], 2) if empty["fan_out"]["all"] else None
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teams", type=int, default=300)
    ap.add_argument("--submissions", type=int, default=3000)
    ap.add_argument("--games", type=int, default=1_000_000)
    ap.add_argument("--watchers", type=int, default=500)
    ap.add_argument("--requests", type=int, default=20, help="timed GETs a page (after one warm-up)")
    ap.add_argument(
        "--quick", action="store_true", help="30 teams, 300 submissions, 20,000 games, 100 watchers"
    )
    ap.add_argument(
        "--watched",
        type=int,
        default=0,
        help="the service's table applied over the last N games before its checkpoint only"
        " (a stand-in for a term's watching; 0: every game)",
    )
    ap.add_argument("--json", action="store_true", help="every figure as one JSON object on the last line")
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="generate into this folder and keep it; a folder generated before is served again as it is",
    )
    ap.add_argument(
        "--only",
        type=lambda v: [n for n in v.split(",") if n],
        default=[],
        help="time these pages only (names as printed, comma-separated): no fan-out, backup or restore",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.teams, args.submissions, args.games, args.watchers, args.requests = 30, 300, 20_000, 100, 10
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # 500 streams: the service and this process
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    with tempfile.TemporaryDirectory(prefix="service-scale-") as t:
        tmp = args.keep or Path(t)
        tmp.mkdir(parents=True, exist_ok=True)
        played: list[Template] = []

        def templates() -> list[Template]:
            if not played:  # played once, when a size is generated (not when all are reused)
                t0 = time.perf_counter()
                played.extend(play_templates(tmp))
                print(
                    f"{len(played)} games played for templates in {time.perf_counter() - t0:.1f} s",
                    flush=True,
                )
            return played

        empty = measure(tmp, "empty", Sizes(4, 8, 40), templates, args)
        big = measure(tmp, "term", Sizes(args.teams, args.submissions, args.games), templates, args)
    report = {
        "sizes": {
            "teams": args.teams,
            "submissions": args.submissions,
            "games": args.games,
            "watchers": args.watchers,
            "requests": args.requests,
        },
        "empty": empty,
        "term": big,
        "x_empty": ratios(big, empty),
        "worst_p95_ms": max((p["p95"] for p in big["pages"].values()), default=0),
    }
    print(f"worst page p95 at the term's size: {report['worst_p95_ms']} ms (goal <= 100 ms)")
    if args.json:
        print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
