"""Issue 26, item 4: a refused check says why, with the bot's own output
around the failure (its traceback), not only "answered HTTP 500"."""

from __future__ import annotations

import sys
from pathlib import Path

from protocol.messages import Timeouts
from referee.admission import AdmissionSettings, admit
from referee.bots.factory import BotSpec
from referee.diagnostics import output_by_request
from referee.replay import frames
from referee.replay import read as read_replay
from tests.support import PROGRAMS

TALKER = str(PROGRAMS / "talker.py")


async def test_a_bot_that_raises_in_act_is_refused_with_its_traceback(tmp_path: Path) -> None:
    spec = BotSpec(name="ada", command=[sys.executable, TALKER, "--port", "{port}", "--raise-at-act"])
    report = await admit(
        spec,
        out_dir=tmp_path / "check-1",
        settings=AdmissionSettings(timeouts=Timeouts(move_ms=2000), games=2),
        seed=3,
    )
    assert not report.ok and report.games == 0
    failed = [line for line in report.lines if not line.ok]
    first = failed[0]
    assert first.what.startswith("/act") and "500" in first.detail
    assert "your bot's output around it" in first.detail
    assert "Traceback (most recent call last)" in first.detail
    assert "RuntimeError: talker cannot count its cards" in first.detail
    # the output quoted is the one of that request: its turn, not the whole log
    assert first.detail.count("RuntimeError: talker cannot count its cards") == 1
    assert report.reason is not None and "\n" not in report.reason


async def test_validation_games_are_kept_with_the_bots_lines_by_turn(tmp_path: Path) -> None:
    """A command bot (its stdout a file the referee marks before each /act):
    its lines are split exactly, each next to the move it printed them for."""
    spec = BotSpec(name="ada", command=[sys.executable, TALKER, "--port", "{port}"])
    folder = tmp_path / "check-1"
    report = await admit(
        spec, out_dir=folder, settings=AdmissionSettings(timeouts=Timeouts(move_ms=2000), games=2), seed=3
    )
    assert report.ok, report.render()
    assert [g.number for g in report.validation] == [1, 2] and report.output
    for g in report.validation:
        record = read_replay(folder / g.replay)
        assert record.header.game_id == g.game_id and record.header.names[g.seat] == "ada"
        outputs = output_by_request([folder / o for o in report.output], g.game_id)
        data = frames(record, public=True, output_seat=g.seat, outputs=outputs)
        own = [f for f in data["frames"][1:] if f["seat"] == g.seat]
        assert len(own) >= 3
        for f in own:
            assert f["output"] == f"turn {f['turn']} of {g.game_id}", f
        assert all("output" not in f for f in data["frames"][1:] if f["seat"] != g.seat)
        assert "output" not in frames(record, public=True)["frames"][1]


def test_a_turns_output_is_capped(tmp_path: Path) -> None:
    log = tmp_path / "bot.stdout.log"
    log.write_text(
        "--- game g1\n--- act g1.1 0\n" + "line\n" * 100 + "--- act g1.2 1\nsmall\n"
        "--- act g2.1 0\nother game\n"
    )
    out = output_by_request([log], "g1", cap=200)
    assert out["g1.1"].endswith("\n… cut") and len(out["g1.1"]) <= 200 + len("\n… cut")
    assert out["g1.2"] == "small" and "g2.1" not in out


def test_referee_check_of_a_command_quotes_its_traceback(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from referee.cli import main

    command = f"cmd:{sys.executable} {TALKER} --port {{port}} --raise-at-act"
    result = CliRunner().invoke(main, ["check", command, "--log-dir", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "FAIL  /act set-up choose_up: http_status: POST /act answered HTTP 500" in result.output
    assert "--- your bot's output around it ---" in result.output
    assert "RuntimeError: talker cannot count its cards" in result.output
