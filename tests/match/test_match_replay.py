"""Replay records: write/read round trip, re-run gives the same result, tampering is caught."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import aiohttp
import msgspec
import pytest
from aiohttp import web

from protocol import Play, Rules
from referee.match import Match, default_action
from referee.record import (
    DisqualifiedLine,
    FaultPolicy,
    NoticeLine,
    ReplayRecord,
    RequestLine,
    latency_stats,
)
from referee.replay import ReplayError, ReplayMismatch, dumps, loads, read, rerun, write
from tests.support.match import FAST, Recorder, run_game
from tests.support.programs.zoo import good_app, zoo_app


@pytest.fixture
async def played(session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]) -> Match:
    apps = [make_sample("random"), zoo_app("illegal_index"), make_sample("greedy")]
    _, match = await run_game(apps, session, seed=21)
    return match


async def test_round_trip_and_rerun(played: Match, tmp_path: Path) -> None:
    path = tmp_path / "game.jsonl.gz"
    write(played.record, path)
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f]
    assert rows[0]["type"] == "header" and rows[-1]["type"] == "result"
    assert rows[0]["format"] == 1 and rows[0]["seed"] == 21
    assert rows[0]["policy"] == {"strikes": 3, "forfeit_on_first": False}
    assert {r["type"] for r in rows} == {"header", "request", "disqualified", "result"}
    back = read(path)
    assert back == played.record
    result = rerun(back)
    recorded = played.record.result
    assert recorded is not None
    assert (result.places, result.adjudicated, result.disqualified, result.points, result.turns) == (
        recorded.places,
        recorded.adjudicated,
        recorded.disqualified,
        recorded.points,
        recorded.turns,
    )


async def test_play_match_writes_the_replay(
    session: aiohttp.ClientSession, make_sample: Callable[..., web.Application], tmp_path: Path
) -> None:
    from referee.bots import HttpBot
    from referee.match import play_match
    from tests.support.programs.zoo import serve

    async with serve(make_sample("random")) as u1, serve(make_sample("greedy")) as u2:
        bots = [HttpBot(u1, session=session), HttpBot(u2, session=session)]
        rules = Rules(play_for_places=True, deck="italian")
        result = await play_match(bots, 4, rules=rules, timeouts=FAST, replay=tmp_path / "r.gz")
    record = read(tmp_path / "r.gz")
    assert record.header.rules == rules
    assert record.result == result
    assert rerun(record).places == result.places


async def test_tampered_records_are_caught(played: Match) -> None:
    data = dumps(played.record)
    rows = data.splitlines()
    # another state hash
    i = next(k for k, r in enumerate(rows) if b'"request"' in r)
    row = json.loads(rows[i])
    row["state_sha256"] = "0" * 64
    bad = rows[:i] + [json.dumps(row).encode()] + rows[i + 1 :]
    with pytest.raises(ReplayMismatch, match="differs from the state that was sent"):
        rerun(loads(b"\n".join(bad)))
    # another seed: the first state differs already
    record = loads(data)
    record.header.seed += 1
    with pytest.raises(ReplayMismatch):
        rerun(record)
    # another action: some later state (or the result) differs
    record = loads(data)
    lines = [l for l in record.lines if isinstance(l, RequestLine) and l.by == "bot" and l.turn > 2]
    target = next(l for l in lines if isinstance(l.action, Play))
    target.action = default_action([Play(cards=["C"])])
    with pytest.raises(ReplayMismatch):
        rerun(record)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="cannot read"):
        read(tmp_path / "missing.gz")
    (tmp_path / "plain").write_bytes(b"not gzip")
    with pytest.raises(ReplayError):
        read(tmp_path / "plain")
    with pytest.raises(ReplayError, match="first line must be the header"):
        loads(b'{"type": "notice", "seat": 0, "call": "start", "fault": {"kind": "timeout", "turn": 0}}\n')
    with pytest.raises(ReplayError, match="empty"):
        loads(b"")
    with pytest.raises(ReplayError, match="x:1"):
        loads(b"{nope", "x")


async def test_notice_lines(
    session: aiohttp.ClientSession, make_sample: Callable[..., web.Application]
) -> None:
    """/start and /end faults: recorded, no strike, the game unaffected."""

    app = make_sample("random")
    grumpy = good_app("grumpy", start_status=500, end_status=404)
    result, match = await run_game([app, grumpy], session, policy=FaultPolicy(strikes=1))
    assert result.strikes == [0, 0]
    assert result.disqualified == []
    notices = [l for l in match.record.lines if isinstance(l, NoticeLine)]
    assert [(n.seat, n.call, n.fault.kind) for n in notices] == [
        (1, "start", "http_status"),
        (1, "end", "http_status"),
    ]
    assert [f.kind for f in result.faults[1]] == ["http_status", "http_status"]
    assert result.faults[1][1].turn == result.turns
    rerun(match.record)


def test_default_action() -> None:
    from protocol import ChooseUp, Draw, Flip, Pass, Pickup, Swap

    assert default_action([Play(cards=["5R"]), Pickup()]) == Pickup()
    assert default_action([Draw(), Play(cards=["C"]), Play(cards=["9R", "9G"]), Play(cards=["9R"])]) == Play(
        cards=["9R"]
    )
    assert default_action([Swap(give="3R", take="9B"), Pass()]) == Pass()
    assert default_action([Flip(slot=1), Flip(slot=2)]) == Flip(slot=1)
    assert default_action([ChooseUp(cards=["1R", "2R", "3R"])]) == ChooseUp(cards=["1R", "2R", "3R"])


def test_latency_stats() -> None:
    stats = latency_stats([float(v) for v in range(1, 101)])
    assert (stats.count, stats.p50_ms, stats.p95_ms, stats.max_ms) == (100, 50.0, 95.0, 100.0)
    assert latency_stats([]).count == 0
    assert latency_stats([3.0]).p95_ms == 3.0


def test_fault_policy_decodes_strictly() -> None:
    assert msgspec.convert({"strikes": 2}, FaultPolicy) == FaultPolicy(strikes=2)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"strike": 2}, FaultPolicy)
    assert FaultPolicy(strikes=0).disqualifies(100) is False
    assert FaultPolicy(forfeit_on_first=True).disqualifies(1) is True


def test_disqualified_line_must_follow_its_request(played: Match) -> None:
    record = loads(dumps(played.record))
    dq = next(l for l in record.lines if isinstance(l, DisqualifiedLine))
    record.lines.remove(dq)
    record.lines.insert(0, dq)
    with pytest.raises(ReplayMismatch, match="does not follow its request"):
        rerun(record)


async def test_setup_requests_are_the_encoded_requests() -> None:
    """The set-up requests go out together, each built straight from the
    engine: each body a bot gets decodes to the ActRequest of that seat's
    view, with its own request id and the move limit, and the state hashed
    for the record is that view's encoding (the record's hashes are checked
    against what bots over HTTP received in tests.support.match)."""
    import hashlib
    import random

    from protocol import decode_act_request, encode
    from referee.game import new_game, view

    bots = [Recorder(f"r{seat}", seed=seat) for seat in range(3)]
    match = Match(bots, 3, timeouts=FAST)
    await match.play()
    hashed = {
        line.request_id: line.state_sha256 for line in match.record.lines if isinstance(line, RequestLine)
    }
    state = new_game(Rules(), match.names, random.Random(3))
    assert state.to_move() == [0, 1, 2]  # set-up: every seat chooses at once
    for seat in state.to_move():
        body, request_id, _, limit_s = bots[seat].sent[0]
        request = decode_act_request(body)
        assert request.state == view(state, seat)
        assert hashed[request_id] == hashlib.sha256(encode(view(state, seat))).hexdigest()
        assert request.request_id == request_id == f"{match.game_id}.{seat + 1}"
        assert limit_s == FAST.move_ms / 1000


def test_the_viewer_and_the_rerun_read_a_record_alike(played: Match, tmp_path: Path) -> None:
    """One reading of a record (record.steps): the viewer's frames and the
    re-run accept the same records and refuse the same ones (issue 12)."""
    from referee.record import steps
    from referee.replay import frames

    record = loads(dumps(played.record))
    data = frames(record)
    requests = [l for l in record.lines if isinstance(l, RequestLine)]
    applied = [l for l in requests if l.by != "skipped"]
    assert len(data["frames"]) == 1 + len(applied)
    assert [f["seat"] for f in data["frames"][1:]] == [l.seat for l in applied]
    assert any("is disqualified" in f["label"] for f in data["frames"])
    assert any(f["by"] == "default" and "(default move)" in f["label"] for f in data["frames"])
    # Each step's events are the ones it added; the last state is the result's.
    walked = list(steps(record))
    assert [s.line.request_id for s in walked] == [l.request_id for l in requests]
    assert walked[-1].state.over and walked[-1].state.result().places == record.result.places
    # A plain (uncompressed) file reads as well as a gzip one.
    (tmp_path / "plain.jsonl").write_bytes(dumps(record))
    assert read(tmp_path / "plain.jsonl") == record

    def refused(change: Callable[[ReplayRecord], None]) -> list[str]:
        broken = loads(dumps(record))
        change(broken)
        out = []
        for reader in (rerun, frames):
            with pytest.raises(ReplayMismatch) as err:
                reader(broken)
            out.append(str(err.value))
        return out

    def tamper_hash(r: ReplayRecord) -> None:
        next(l for l in r.lines if isinstance(l, RequestLine)).state_sha256 = "0" * 64

    def orphan_dq(r: ReplayRecord) -> None:
        dq = next(l for l in r.lines if isinstance(l, DisqualifiedLine))
        r.lines.remove(dq)
        r.lines.insert(0, dq)

    def truncate(r: ReplayRecord) -> None:
        del r.lines[len(r.lines) // 2 :]

    def another_result(r: ReplayRecord) -> None:
        assert r.result is not None
        r.result.turns += 1

    for change, words in (
        (tamper_hash, "differs from the state that was sent"),
        (orphan_dq, "does not follow its request"),
        (truncate, "the record has"),
        (another_result, "differs from the recorded"),
    ):
        a, b = refused(change)
        assert a == b and words in a
