"""Issue 32 item 13: a bot's words reach the terminal as text, never as escape sequences.

The hostile bot (hostile_bot.py) is a real HTTP bot on loopback that the
referee starts (``cmd:``): its self-declared name, author and version, and
what it prints to stderr at every ``/act``, carry an OSC window title, a
clear screen, a DCS string, an 8-bit CSI and a right-to-left override.
``referee match``, ``check``, ``replay`` and ``tournament`` run as
processes, as a person runs them; what they print holds none of those
characters, and still shows what the bot said, escaped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.programs.hostile_bot import ATTACKS, HOSTILE
from tests.support.programs.hostile_bot import SCRIPT as HOSTILE_BOT

ROOT = Path(__file__).resolve().parents[2]
BOT = f"cmd:{sys.executable} {HOSTILE_BOT} --port {{port}}"
RANDOM = f"cmd:{sys.executable} -m sample_bots.random --port {{port}} --log-level WARNING"

#: What must not reach a terminal: C0 controls but line feed and tab (ESC,
#: BEL, CR...), DEL, C1 controls (an 8-bit CSI), the bidi controls.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")
#: Each attack as it is shown instead (the bot's words, escaped).
SHOWN = ("\\x1b]0;pwned\\x07", "\\x1b[2J", "\\x1bPq#0;2;0;0;0\\x1b\\", "\\x9b31m", "\\u202egnp.exe")


def referee(*args: str, ok: tuple[int, ...] = (0,), stdout_only: bool = False) -> str:
    """Run ``referee ARGS``; its stdout and stderr (or its stdout alone),
    decoded as a terminal would receive them (any byte that is not UTF-8
    kept, as a surrogate)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "referee.cli", *args], capture_output=True, timeout=300, cwd=ROOT, env=env
    )
    out = (proc.stdout + proc.stderr).decode("utf-8", "surrogateescape")
    assert proc.returncode in ok, out
    return proc.stdout.decode("utf-8", "surrogateescape") if stdout_only else out


def assert_inert(out: str, *, shown: tuple[str, ...] = SHOWN) -> None:
    raw = {name: out.count(seq) for name, seq in ATTACKS.items() if out.count(seq)}
    found = sorted({f"U+{ord(c):04X}" for c in FORBIDDEN.findall(out)})
    assert raw == {} and found == [], f"reached the terminal: sequences {raw}, characters {found}"
    assert not re.search("[\ud800-\udfff]", out), "bytes that are not UTF-8 reached the terminal"
    for text in shown:
        assert text in out, f"{text!r} is not shown: the bot's words must stay readable\n{out}"


def test_match_and_replay_show_a_hostile_name_and_faults_as_text(tmp_path: Path) -> None:
    replay = tmp_path / "game.jsonl.gz"
    common = ("--seed", "3", "--move-ms", "1000", "--log-dir", str(tmp_path / "logs"))
    out = referee("match", "--bot", BOT, "--bot", RANDOM, "--replay", str(replay), *common)
    assert "http_status" in out and "disqualified" in out  # the bot's faults are reported
    assert_inert(out)
    assert_inert(referee("replay", str(replay)))
    as_json = referee("match", "--bot", BOT, "--bot", RANDOM, "--json", *common, stdout_only=True)
    assert_inert(as_json, shown=())
    assert json.loads(as_json)["names"][0] == HOSTILE  # the same JSON, escaped


def test_check_shows_a_hostile_handshake_and_output_as_text(tmp_path: Path) -> None:
    out = referee("check", BOT, "--log-dir", str(tmp_path / "logs"), ok=(1,))
    assert "--- your bot's output around it ---" in out and "thinking bot" in out  # its stderr is quoted
    assert_inert(out)


def test_tournament_shows_hostile_names_as_text_and_never_as_markup(tmp_path: Path) -> None:
    """The league's names are the organiser's, but a team may have chosen
    them: the standings, the settled line and head to head escape them, and
    a name that is rich markup is shown as it is written."""
    markup = "[bold red]x[/bold red]"
    league = tmp_path / "league.toml"
    bots = [(HOSTILE, BOT.removeprefix("cmd:")), (markup, RANDOM.removeprefix("cmd:"))]
    lines = ["[tournament]", 'name = "t"', "seed = 1", "table_size = 2", "rounds = 1", "", "[timeouts]"]
    lines += ["move_ms = 1000", ""]
    for name, command in bots:
        lines += ["[[bots]]", f"name = {json.dumps(name)}", f"command = {json.dumps(command.split())}", ""]
    league.write_text("\n".join(lines))
    out = referee("tournament", str(league), "--out", str(tmp_path / "out"), "--no-progress")
    assert "head to head" in out
    assert_inert(out)
    assert out.count(markup) >= 3  # its row, its column of head to head, and its row there
    assert_inert(referee("standings", str(tmp_path / "out")))


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_is_in_the_hostile_name(attack: str) -> None:
    """The tests above could not pass by the bot saying nothing."""
    assert ATTACKS[attack] in HOSTILE and FORBIDDEN.search(ATTACKS[attack])
