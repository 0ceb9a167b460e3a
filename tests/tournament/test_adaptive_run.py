"""Adaptive leagues played for real (issue 13): the same standings at any
concurrency, after kill -9 and --resume, and with Ray; a league of 40 entries
sharing a few bot processes that ends by itself with the right order."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from referee.bots import free_port
from tests.support.tournament import (
    PY,
    ROOT,
    adaptive_text,
    fault_free,
    kill_then_resume,
    needs_node,
    play_whole,
    write_league,
)


def recorded(db_path: Path) -> list[int]:
    db = sqlite3.connect(db_path)
    try:
        return [row[0] for row in db.execute("SELECT idx FROM games ORDER BY idx")]
    finally:
        db.close()


@needs_node
@pytest.mark.slow
def test_adaptive_standings_do_not_depend_on_concurrency_nor_on_a_kill(tmp_path: Path) -> None:
    """Which games an adaptive league plays depends on results applied in
    schedule order only: concurrency 1, concurrency 6, and a run killed with
    SIGKILL and resumed all play the same games to the same standings."""
    runs = {}
    for name, concurrency in (("one", 1), ("six", 6)):
        (tmp_path / name).mkdir()
        league = write_league(tmp_path / name, adaptive_text(60, concurrency))

        def play(out: Path, league: Path = league) -> str:
            stderr = play_whole(league, out)
            assert "adaptive" in stderr
            return stderr

        runs[name] = fault_free(tmp_path / name / "out", play)
    a, b = ((o / "standings.json").read_text() for o in runs.values())
    assert a == b
    games = recorded(runs["one"] / "tournament.sqlite")
    assert games == list(range(len(games))) and 0 < len(games) <= 60

    (tmp_path / "killed").mkdir()
    league = write_league(tmp_path / "killed", adaptive_text(60, 3))
    out = fault_free(
        tmp_path / "killed" / "out", lambda out: kill_then_resume(league, out, after=min(len(games) - 1, 7))
    )
    assert recorded(out / "tournament.sqlite") == games, "the same games, each recorded once"
    assert (out / "standings.json").read_text() == a


#: The forty entries' game budget. A tactician beats a greedy bot in 58-60% of
#: their meetings (72% over a deal's four rotations), so that every one of 14
#: tactician entries ranks above every one of 13 greedy entries takes many more
#: games than the bots' order. The same league played in process (the sample
#: bots' own code, no HTTP, 20 or 40 league seeds) has that strict order right
#: in 16 of 20 at 2,000 games, 19 of 20 at 3,000 and 40 of 40 at 4,000.
#: Other estimates from the same games do no better (at 3,000: a
#: Plackett-Luce fit of all of them 20 of 20, TrueSkill over whole deals 19,
#: tau = 0 15), only more games.
MAX_GAMES = 4000
#: The league's seed, and the random bot's: the whole league is then the same
#: at every run, the very league benchmarks/entries.py plays for this seed.
SEED = 5


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_forty_entries_of_three_bots_settle_by_themselves(tmp_path: Path) -> None:
    """40 league entries served by 3 sample-bot processes (a service plays
    many games at once, and several seats of one game), 4-seat tables,
    adaptive: the league ends by itself; every tactician entry ranks above
    every greedy entry above every random entry, and entries of one bot are
    not reported as separated (issue 13).

    The strict order by entry missed in 1 real run of 4 at 3,000 games
    while the tactician kept one memory per game instead of one per seat:
    the seats of a game that one service holds shared the tracker of
    whichever seat's /start came last (tests/bots/test_bots_games.py), so
    its entries played worse, each differently (their mu spread 1.43 against
    sigma 0.67). Fixed, it was right in 2 real runs of 2 at 3,000 games and
    missed in 1 of 1 at 4,000 (by 0.11 of mu), where the same league in
    process (benchmarks/entries.py, which plays the very games this league
    plays) was right for 40 league seeds of 40: the two differed only by
    the random bot, then unseeded here. Seeded (SEED), the whole league is
    the same at every run: the league benchmarks/entries.py plays for SEED,
    right at 4,000 games with the weakest tactician entry 1.15 of mu above
    the strongest greedy one."""
    procs = []
    urls = {}
    try:
        for module in ("tactician", "greedy", "random"):
            port = free_port()
            procs.append(
                subprocess.Popen(
                    [
                        PY,
                        "-m",
                        f"sample_bots.{module}",
                        "--port",
                        str(port),
                        *(["--seed", str(SEED)] if module == "random" else []),
                    ],
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            urls[module] = f"http://127.0.0.1:{port}"
        for url in urls.values():
            port = int(url.rsplit(":", 1)[1])
            deadline = time.monotonic() + 20
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert time.monotonic() < deadline, f"{url} did not start"
                time.sleep(0.1)
        counts = {"tactician": 14, "greedy": 13, "random": 13}
        lines = [
            "[tournament]",
            'name = "forty"',
            f"seed = {SEED}",
            "table_size = 4",
            'schedule = "adaptive"',
            "concurrency = 16",
            "",
            "[timeouts]",
            "move_ms = 2000",
            "",
            "[stop]",
            "confidence = 0.95",
            f"max_games = {MAX_GAMES}",
            "",
        ]
        for module, n in counts.items():
            for i in range(n):
                lines += ["[[bots]]", f'name = "{module}-{i:02d}"', f'url = "{urls[module]}"', ""]
        league = write_league(tmp_path, "\n".join(lines))
        out = tmp_path / "out"
        # 7 to 10 minutes on 2 quiet cores, twice that loaded: within the test's own timeout
        r = subprocess.run(
            [PY, "-m", "referee.cli", "tournament", str(league), "--out", str(out), "--no-progress"],
            capture_output=True,
            text=True,
            timeout=2800,
            cwd=ROOT,
        )
        assert r.returncode == 0, r.stderr
    finally:
        for p in procs:
            p.kill()
            p.wait()
    rows = json.loads((out / "standings.json").read_text())
    order = [row["bot"].split("-")[0] for row in rows]
    bots = list(counts)
    for upper, lower in zip(rows, rows[1:]):  # never two entries of one bot, never in the wrong order
        if upper["separated_below"]:
            assert bots.index(upper["bot"].split("-")[0]) < bots.index(lower["bot"].split("-")[0]), (
                upper["bot"],
                lower["bot"],
                upper["p_above_next"],
            )
    assert "settled" in r.stdout
    assert sum(row["games"] for row in rows) <= 4 * MAX_GAMES
    ranks: dict[str, list[int]] = {}
    for row in rows:
        ranks.setdefault(row["bot"].split("-")[0], []).append(row["rank"])
    assert max(ranks["greedy"]) < min(ranks["random"]) and max(ranks["tactician"]) < min(ranks["random"]), (
        order
    )
    assert sorted(ranks, key=lambda bot: sum(ranks[bot]) / len(ranks[bot])) == bots  # by their mean rank
    assert order == [bot for bot, n in counts.items() for _ in range(n)], "".join(b[0] for b in order)
