"""The SDK's printing per game (issue 35, item 6): ``say`` and ``game_log``
write whole lines, each starting with the game's tag, so that the service's
per-game output (:func:`referee.diagnostics.output_by_game`, which gives a
line naming a game's id to that game) separates games played at once."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import aiohttp

from referee.bots.managed import GAME_MARK
from referee.diagnostics import output_by_game
from sample_bots import sdk
from tests.support.bots import body, by_name

ROOT = Path(__file__).resolve().parents[2]

BOT = """\
from protocol import BotInfo
from sample_bots.sdk import game_log, run_bot, say

def decide(request):
    for i in range(40):
        say(request, "line", i, "of", request.request_id, "\\nand its second line")
    try:
        raise RuntimeError("a bug in " + request.request_id)
    except RuntimeError:
        game_log(request).warning("caught", exc_info=True)
    return 0

run_bot(decide, BotInfo(apiversion="1", name="sayer", author="t"))
"""

#: Two games' ids, as the referee makes them (opaque hex).
GAMES = ("5f2c9a0b7e11d3a4c9f01b2e", "a07d44e1c2b9f3a8d6e5c410")
LINE = re.compile(
    r"\[game ([0-9a-f]{24}) seat \d turn \d+\] (line \d+ of [0-9a-f]{24}\.\d |and its second line)\n"
)


def test_say_and_game_log_write_whole_tagged_lines_that_the_diagnostics_split_by_game(tmp_path: Path) -> None:
    script = tmp_path / "sayer.py"
    script.write_text(BOT)
    sock = tmp_path / "bot.sock"
    out = tmp_path / "bot.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BOT_UNIX": str(sock)}
    env.pop("BOT_OUTPUT_MARKS", None)
    # the referee's marks before each game (referee.bots.managed), then the bot's output
    out.write_text("".join(f"{GAME_MARK}{g}\n" for g in GAMES))
    with out.open("ab") as stdout:
        proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=stdout, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        for raw in proc.stderr:  # ready: the SDK says where it listens once it does
            if b"listening on unix:" in raw:
                break
        else:
            raise AssertionError(f"the bot ended: {proc.wait()}")

        async def ask() -> None:
            async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as s:

                async def one(game: str, n: int) -> None:
                    act = by_name("ordinary play").request(request_id=f"{game}.{n}", game_id=game)
                    async with s.post("http://bot/act", data=body(act)) as r:
                        assert r.status == 200

                await asyncio.gather(*(one(g, n) for n in range(4) for g in GAMES))

        asyncio.run(ask())
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    text = out.read_text()
    lines = text.splitlines(keepends=True)[len(GAMES) :]
    assert len(lines) == 2 * 4 * 40 * 2
    assert all(LINE.fullmatch(line) for line in lines), [x for x in lines if not LINE.fullmatch(x)][:5]
    games = output_by_game([out])
    for game in GAMES:
        mine = games[game].splitlines()
        assert len(mine) == 4 * 40 * 2 and all(f"[game {game} " in x for x in mine)
        assert sum(f"of {game}." in x for x in mine) == 4 * 40
    # the log: every line of a record, its traceback's too, names the game
    logged = [x for x in err.decode().splitlines() if x.strip()]
    assert sum("RuntimeError: a bug in" in x for x in logged) == 8
    for x in logged:
        assert x.startswith(tuple(f"[game {g} seat" for g in GAMES)), x


def test_say_tags_each_line_and_game_tag_names_game_seat_and_turn(tmp_path: Path) -> None:
    act = by_name("ordinary play").request(request_id="g7.3", game_id="g7")
    path = tmp_path / "out.txt"
    with path.open("w") as f:
        sdk.say(act, "a", 1, "\nb", sep="-", file=f)
    tag = f"[game g7 seat {act.seat} turn {act.turn}]"
    assert sdk.game_tag(act) == tag
    assert path.read_text() == f"{tag} a-1-\n{tag} b\n"
