"""``referee play``: a bot or a person against the house bots, through the real command line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from referee.cli.play import action_text
from referee.record import RequestLine
from referee.replay import frames, read, rerun
from sample_bots import random as sample_random
from sample_bots.sdk import make_app
from tests.support.programs.zoo import serve

ROOT = Path(__file__).resolve().parents[2]
GAME_LINE = re.compile(r"^game (\d+) seed (\d+): (.*) -> (\S+)$")


def referee(*args: str, cwd: Path, stdin: int | None = None) -> subprocess.Popen[str]:
    """``python -m referee.cli ARGS`` of this tree, its output piped."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "referee.cli", *args],
        cwd=cwd,
        env=env,
        stdin=stdin if stdin is not None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextlib.contextmanager
def sample_bot_at_a_url() -> Iterator[str]:
    """The random sample bot served on loopback from a thread of its own: its base URL."""
    ready = threading.Event()
    where: list[str] = []
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def run() -> None:
        bot = sample_random.RandomBot(seed=3)
        async with serve(make_app(bot.decide, sample_random.INFO, on_end=bot.on_end)) as url:
            where.append(url)
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),))
    thread.start()
    try:
        assert ready.wait(30), "the sample bot did not start"
        yield where[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join()
        loop.close()


def test_a_person_plays_a_whole_game_from_stdin(tmp_path: Path) -> None:
    """A scripted person reads each view the terminal prints, picks one of the
    numbered legal actions (a number out of range first: it is refused and
    asked again), plays to the end; the replay opens and holds exactly the
    actions chosen, at the person's seat."""
    proc = referee(
        "play", "--human", "--against", "house-greedy", "--against", "random", "--seed", "4",
        "--out", "mine", "--move-ms", "30000", cwd=tmp_path,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    rng = random.Random(2)
    offered: list[str] = []
    chosen: list[str] = []
    output: list[str] = []
    refused = False
    for line in proc.stdout:
        output.append(line)
        if line.startswith("legal actions:"):
            offered = []
        elif m := re.match(r"^  (\d+)\) (.*)$", line):
            assert int(m.group(1)) == len(offered) + 1
            offered.append(m.group(2))
        elif line.startswith(f"your choice (1-{len(offered)}):"):
            if not refused:
                proc.stdin.write(f"{len(offered) + 1}\n")
                refused = True
            else:
                pick = rng.randrange(len(offered))
                chosen.append(offered[pick])
                proc.stdin.write(f"{pick + 1}\n")
            proc.stdin.flush()
    proc.stdin.close()
    assert proc.wait(60) == 0, proc.stderr.read()
    text = "".join(output)
    assert re.search(r"^(\d+) is not one of the actions: choose 1 to (\d+)$", text, re.M)
    assert "you are seat 0 of 3 against house-greedy, house-random; 30 s a move" in text
    assert "your hand:" in text and "your 3UP:" in text and "your 3DOWN:" in text and "pile (" in text
    assert re.search(r"game over: you placed \d(st|nd|rd) of 3", text)
    m = GAME_LINE.match(output[-1].rstrip("\n"))
    assert m, output[-1]
    assert m.group(2) == "4" and "you*" in m.group(3) and "you: 0 faults" in m.group(3)
    replay = tmp_path / m.group(4)
    assert replay == tmp_path / "mine" / "game-000001.jsonl.gz"
    record = read(replay)
    assert record.header.names == ["you", "house-greedy", "house-random"]
    mine = [line for line in record.lines if isinstance(line, RequestLine) and line.seat == 0]
    assert [line.by for line in mine] == ["bot"] * len(chosen)
    assert [action_text(line.action) for line in mine if line.action is not None] == chosen
    assert record.result is not None and rerun(record).places == record.result.places
    assert len(frames(record)["frames"]) > len(chosen)  # the viewer's steps


def test_leaving_stdin_leaves_the_game(tmp_path: Path) -> None:
    """The end of input mid-game: a clear message, the seat plays the safe
    default until the fault policy disqualifies it, the game ends and is kept."""
    proc = referee(
        "play", "--human", "--against", "greedy", "--seed", "9", cwd=tmp_path, stdin=subprocess.DEVNULL
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "input closed: you left the game" in out
    m = GAME_LINE.match(out.splitlines()[-1])
    assert m and "you: 3 faults (connection), disqualified" in m.group(3), out
    record = read(tmp_path / m.group(4))
    assert record.result is not None and record.result.disqualified == [0]


def test_a_bot_by_url_against_two_house_bots(tmp_path: Path) -> None:
    """A bot at a URL against two house bots, two deals: one line per game
    (the bot moves seat), each replay where the line says."""
    with sample_bot_at_a_url() as url:
        proc = referee(
            "play", url, "--against", "house-greedy", "--against", "house-tactician", "--seed", "7",
            "--games", "2", "--out", "g", cwd=tmp_path, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert len(lines) == 2, out
    for number, (line, seat) in enumerate(zip(lines, (0, 1)), start=1):
        m = GAME_LINE.match(line)
        assert m, line
        assert (m.group(1), m.group(2)) == (str(number), str(6 + number))
        assert "random*" in m.group(3) and "random: 0 faults" in m.group(3)
        record = read(tmp_path / m.group(4))
        assert record.header.names[seat] == "random"
        assert set(record.header.names) == {"random", "house-greedy", "house-tactician"}
        assert record.result is not None and record.result.faults[seat] == []


def test_bad_inputs_say_what_to_do(tmp_path: Path) -> None:
    cases = [
        (
            ["play", "--human", "--against", "house-nobody"],
            "'house-nobody' is not a house bot: the house bots are",
        ),
        (["play", "--against", "greedy"], "give your BOT (a URL or 'cmd:COMMAND') to play it, or --human"),
        (["play", "ftp://x", "--against", "greedy"], "a bot is a URL (http://127.0.0.1:8001)"),
        (["play", "--human", "--against", "greedy"] + ["--against", "random"] * 6, "a game needs 2 to"),
    ]
    for args, message in cases:
        proc = referee(*args, cwd=tmp_path, stdin=subprocess.DEVNULL)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, (args, out, err)
        assert message in err, (args, err)
