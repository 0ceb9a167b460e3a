"""Issue 26, item 4: a refused check says why, with the bot's own output
around the failure (its traceback), not only "answered HTTP 500"."""

from __future__ import annotations

import sys
from pathlib import Path

from protocol.messages import Timeouts
from referee.admission import admit
from referee.bots.factory import BotSpec

TALKER = str(Path(__file__).resolve().parent / "talker.py")


async def test_a_bot_that_raises_in_act_is_refused_with_its_traceback(tmp_path: Path) -> None:
    spec = BotSpec(name="ada", command=[sys.executable, TALKER, "--port", "{port}", "--raise-at-act"])
    report = await admit(spec, out_dir=tmp_path / "check-1", timeouts=Timeouts(move_ms=2000), games=2, seed=3)
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
