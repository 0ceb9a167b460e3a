"""Statuses are typed literals, checked where they are read from or written
to storage; the settledness estimate lives with the rest of the statistics;
a check's line is one type for ``referee check`` and the admission check."""

from __future__ import annotations

import json
import math
from pathlib import Path

import msgspec
import pytest

from referee.admission import AdmissionLine, AdmissionReport
from referee.bots.factory import BotSpec
from referee.check import CheckLine
from referee.service.store import RUN_STATUSES, SUBMISSION_STATUSES, ServiceDB
from referee.tournament import settle
from referee.tournament.ratings import Standing
from referee.tournament.store import Entry, open_ladder_store


def _entry(status: str) -> Entry:
    return Entry(
        name="a v1",
        team="a",
        submission=1,
        spec=BotSpec(name="a v1", url="http://127.0.0.1:1"),
        mu0=25.0,
        sigma0=8.3,
        games0=0,
        joined_at=1.0,
        first_index=0,
        status=status,
    )  # type: ignore[arg-type]


def test_a_stored_entry_comes_back_and_an_unknown_status_is_refused_by_name(tmp_path: Path) -> None:
    store = open_ladder_store(tmp_path / "t.sqlite")
    try:
        store.put_entry(_entry("retired"))
        assert [(e.name, e.status) for e in store.entries()] == [("a v1", "retired")]
        store.put_entry(_entry("gone"))  # written unchecked, as a damaged or newer file may hold it
        with pytest.raises(msgspec.ValidationError, match=r"'gone'.*\$\.status"):
            store.entries()
    finally:
        store.close()


def test_a_run_status_is_checked_where_it_is_stored(tmp_path: Path) -> None:
    db = ServiceDB(tmp_path / "s.sqlite")
    try:
        comp = db.add_competition("c", "")
        run = db.begin_run(comp.id, out_dir=str(tmp_path), league_json="{}", total_games=0)
        assert not isinstance(run, str) and run.status == "running"
        with pytest.raises(ValueError, match="not a run status: 'done'"):
            db.end_run(run.id, "done")
        db.end_run(run.id, "finished")
        again = db.run(run.id)
        assert again is not None and again.status == "finished"
    finally:
        db.close()
    assert RUN_STATUSES == ("running", "finished", "interrupted", "failed")
    assert "waiting" in SUBMISSION_STATUSES and "accepted" in SUBMISSION_STATUSES


def test_one_line_type_and_the_admission_report_keeps_its_json() -> None:
    assert AdmissionLine is CheckLine
    line = CheckLine(False, "/act plain play", "timeout: 120 ms", "answer in time")
    report = AdmissionReport(ok=False, lines=[line, CheckLine(True, "GET /", "'x' 1 by y")])
    raw = json.loads(msgspec.json.encode(report))
    assert raw["lines"] == [
        {"ok": False, "what": "/act plain play", "detail": "timeout: 120 ms", "fix": "answer in time"},
        {"ok": True, "what": "GET /", "detail": "'x' 1 by y", "fix": ""},
    ]
    assert msgspec.json.decode(msgspec.json.encode(report), type=AdmissionReport) == report
    assert line.render() == "FAIL  /act plain play: timeout: 120 ms\n      fix: answer in time"


def test_games_to_separate() -> None:
    # (z(0.95)/z(0.8))² ≈ 3.82: 100 games each need about 282 more
    assert settle.games_to_separate(0.8, 100, 0.95) == math.ceil(
        100 * ((settle.z_of(0.95) / settle.z_of(0.8)) ** 2 - 1)
    )
    assert 281 <= (settle.games_to_separate(0.8, 100, 0.95) or 0) <= 283
    assert settle.games_to_separate(0.2, 100, 0.95) == settle.games_to_separate(0.8, 100, 0.95)
    assert settle.games_to_separate(0.99, 100, 0.95) == 0  # separated already
    assert settle.games_to_separate(0.52, 100, 0.95) is None  # looks equal
    assert settle.games_to_separate(0.8, 0, 0.95) is None  # no games

    def row(bot: str, games: int, p: float | None) -> Standing:
        return Standing(
            bot=bot,
            mu=25.0,
            sigma=1.0,
            score=22.0,
            games=games,
            wins=0,
            avg_place=1.5,
            faults={},
            p_above_next=p,
        )

    assert row("a", 100, 0.8).games_to_separate(row("b", 40, None), 0.95) == settle.games_to_separate(
        0.8, 40, 0.95
    )
    assert row("a", 100, None).games_to_separate(row("b", 40, None), 0.95) is None  # unknown: 1/2
