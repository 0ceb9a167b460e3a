"""The service's commands: ``referee serve`` (admin token shown once),
``referee start`` (a run from the command line), ``referee replay --html``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from referee.cli.replay import replay
from referee.cli.serve import serve
from referee.cli.start import start
from referee.service.store import ServiceDB
from tests.support.web import Background, league_text, sample_bot_app


def test_serve_prints_the_admin_token_once(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from referee.web import server

    started: list[dict[str, Any]] = []
    monkeypatch.setattr(server, "run", lambda app, **kw: started.append(kw))
    r = CliRunner().invoke(serve, ["--db", str(db_path), "--port", "0"])
    assert r.exit_code == 0, r.output
    m = re.search(r"admin token \(shown once, keep it\): (\S+)", r.output)
    assert m and started and started[0]["host"] == "127.0.0.1"
    token = m.group(1)
    r = CliRunner().invoke(serve, ["--db", str(db_path), "--port", "0"])
    assert r.exit_code == 0 and "admin token" not in r.output
    db = ServiceDB(db_path)
    assert db.is_admin(token)
    db.close()
    r = CliRunner().invoke(serve, ["--db", str(db_path), "--port", "0", "--reset-admin-token"])
    new = re.search(r"admin token \(shown once, keep it\): (\S+)", r.output)
    assert new and new.group(1) != token


def invoke(*args: Any) -> Any:
    """CliRunner().invoke in a thread of its own: ``referee start`` runs an
    event loop, and pytest-playwright may keep one running in this thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(CliRunner().invoke, *args).result(timeout=120)


@pytest.fixture
def bots() -> Iterator[tuple[Background, dict[str, str]]]:
    bg = Background()
    try:
        urls = {k: bg.serve(lambda k=k: sample_bot_app(k)) for k in ("greedy", "random")}
        yield bg, urls
    finally:
        bg.close()


@pytest.mark.slow
def test_start_plays_a_run_and_replay_writes_a_self_contained_viewer(
    db_path: Path, tmp_path: Path, bots: tuple[Background, dict[str, str]]
) -> None:
    _, urls = bots
    db = ServiceDB(db_path)
    comp = db.add_competition("cli", league_text(house={"house": urls["greedy"]}))
    team, _ = db.add_team(comp.id, "ada")
    db.add_submission(
        team.id, kind="url", url=urls["random"], image=None, secret=None, note="", status="accepted"
    )
    db.close()
    r = invoke(start, ["--db", str(db_path), "nope"])
    assert r.exit_code == 2 and "no competition" in r.output
    r = invoke(start, ["--db", str(db_path), "cli"])
    assert r.exit_code == 0, r.output
    assert "run 1: finished" in r.output
    db = ServiceDB(db_path)
    run = db.latest_run(comp.id)
    db.close()
    assert run is not None and run.status == "finished" and run.total_games == 2
    r = invoke(start, ["--db", str(db_path), "cli", "--resume"])
    assert r.exit_code == 2 and "finished" in r.output

    game = Path(run.out_dir) / "replays" / "game-000001.jsonl.gz"
    out = tmp_path / "viewer.html"
    r = CliRunner().invoke(replay, [str(game), "--html", str(out)])
    assert r.exit_code == 0, r.output
    # The summary is referee match's table: each seat's place, faults and latencies.
    assert "game-000001.jsonl.gz: " in r.output and " steps" in r.output
    assert "place  points  faults" in r.output and "p95 ms" in r.output
    assert re.search(r"^\d +(ada|house)\b", r.output, re.M)
    html = out.read_text()
    assert 'id="replay-data"' in html and "<style>" in html and "function" in html
    # Self-contained: nothing loaded from anywhere.
    assert not re.search(r"""(src|href)=["']?(https?:|//|/)""", html)
    assert "<script src" not in html and "<link" not in html
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"not a replay")
    r = CliRunner().invoke(replay, [str(bad)])
    assert r.exit_code == 2 and "error:" in r.output
