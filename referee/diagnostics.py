"""A bot's private diagnostics over a tournament's output folder (issue 14).

For one bot of a run, what its authors need to see why it lost or faulted,
and what nobody else may see:

* every fault, with the exact request that caused it: the ``/act`` body the
  referee sent (its state rebuilt from the replay and checked against the
  hash recorded when it was sent);
* its ``/act`` latency distribution over the run;
* the tail of its own output (a container's or a command's log, capped);
* its games, with the seat it held (for the replay viewer's seat view).
"""

from __future__ import annotations

import bisect
import contextlib
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from protocol.codec import ENCODER
from protocol.messages import APIVERSION

from .bots.managed import ACT_MARK, GAME_MARK
from .bots.process import last_lines, tail_of
from .bots.sandbox.marks import DONE_MARK, without_marks
from .game import view
from .record import LatencyStats, ReplayError, latency_stats, state_hash, steps
from .replay import read as read_replay
from .tournament.store import existing_store

__all__ = ["BotDiagnostics", "FaultReport", "LATENCY_BUCKETS_MS", "diagnose"]

#: Upper bounds of the latency histogram's buckets, in ms (the last is open).
LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)

#: The most faults reported with their requests (the count is always complete).
MAX_FAULTS = 50

#: The most of a bot's log shown.
LOG_CAP = 64 * 1024

#: A game's output is given for this many of the latest games, each capped at GAME_OUTPUT_CAP.
GAMES_WITH_OUTPUT = 20
GAME_OUTPUT_CAP = 4096

#: The games in play at once a line of output may name (the latest started).
RECENT_GAMES = 64


class FaultReport(msgspec.Struct, kw_only=True):
    game: int
    seat: int
    turn: int
    kind: str
    detail: str
    #: The ``/act`` body that was sent, as JSON (None for ``/start`` and
    #: ``/end`` faults, or when the game has no replay).
    request: dict[str, Any] | None = None
    #: The rebuilt state's hash equals the one recorded when it was sent.
    verified: bool = False


class GamePlayed(msgspec.Struct, kw_only=True):
    game: int
    seat: int
    place: int
    faults: int
    has_replay: bool
    #: The bot's output during this game (a container's, capped; the
    #: latest :data:`GAMES_WITH_OUTPUT` games only). When the bot plays
    #: several games at once their output is interleaved.
    output: str = ""


class BotDiagnostics(msgspec.Struct, kw_only=True):
    bot: str
    games: list[GamePlayed]
    #: Every fault of the bot in the run.
    fault_count: int
    #: The first :data:`MAX_FAULTS` of them, with their requests.
    faults: list[FaultReport]
    latency: LatencyStats
    #: Replies per bucket of :data:`LATENCY_BUCKETS_MS` (the last: slower than all).
    histogram: list[int]
    #: The end of the bot's own output (container or command bots), capped.
    log: str = ""


def _histogram(ordered: Sequence[float]) -> list[int]:
    """How many of the sorted values `ordered` fall in each bucket (a bound
    belongs to its bucket): a binary search a bucket (a term's bot answers
    tens of thousands of requests)."""
    ends = [bisect.bisect_right(ordered, bound) for bound in LATENCY_BUCKETS_MS] + [len(ordered)]
    return [end - start for start, end in zip([0, *ends], ends, strict=False)]


def output_by_game(paths: Sequence[Path]) -> dict[str, str]:
    """A bot's log split into games, by game id: a line naming a game's id
    goes to that game; any other line to the game whose ``--- game <id>``
    line came last. A bot that plays one game at a time (concurrency 1, or
    ``fresh_process``) is split exactly; one that plays several at once is
    split exactly only where its lines name their game (the request's
    ``game_id``): docs/student.md says so to bot authors."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    recent: deque[str] = deque(maxlen=RECENT_GAMES)
    for path in paths:
        with contextlib.suppress(OSError), path.open("rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace")
                if line.startswith(GAME_MARK):
                    game_id = line[len(GAME_MARK) :].strip()
                    current = out.setdefault(game_id, [])
                    if game_id:
                        recent.append(game_id)
                    continue
                if line.startswith(DONE_MARK):  # the bot answered: its game goes on
                    continue
                if line.startswith(ACT_MARK):  # the request names its game
                    game_id = line[len(ACT_MARK) :].split(" ", 1)[0].rsplit(".", 1)[0]
                    current = out.setdefault(game_id, [])
                    if game_id and game_id not in recent:
                        recent.append(game_id)
                    continue
                named = next((out[k] for k in recent if k in line), None)
                target = named if named is not None else current
                if target is not None:
                    target.append(line)
    return {k: "".join(v) for k, v in out.items()}


#: The most of a bot's output shown next to one move in the replay.
TURN_OUTPUT_CAP = 4096


def cut(text: str, cap: int) -> str:
    """`text`, its first `cap` characters and "… cut" when longer."""
    return text if len(text) <= cap else text[:cap] + "\n… cut"


def output_by_request(paths: Sequence[Path], game_id: str, cap: int = TURN_OUTPUT_CAP) -> dict[str, str]:
    """What the bot printed while it answered each ``/act`` of game
    `game_id`, by request id (``<game id>.<n>``), each capped at `cap`: the
    lines after the referee's ``--- act <request id> <turn>`` mark up to the
    next mark (``--- done <request id>`` included). Container bots: the log
    pump places the marks where the bot's own marks were (the SDK's, exact)
    or else by the daemon's timestamps (:mod:`referee.bots.sandbox.marks`). A bot
    that answers several requests at once has the lines printed meanwhile
    given to the request it started on last."""
    out: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    current: list[str] | None = None
    key = ""
    prefix = f"{ACT_MARK}{game_id}."
    for path in paths:
        current = None  # each file is split by its own marks
        with contextlib.suppress(OSError), path.open("rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace")
                if (
                    line.startswith((ACT_MARK, GAME_MARK, DONE_MARK))
                    or line.startswith("--- ")
                    and " start of a container" in line
                ):
                    if line.startswith(prefix):
                        key = line[len(ACT_MARK) :].split(" ", 1)[0]
                        current = out.setdefault(key, [])
                    else:
                        current = None
                    continue
                if current is not None and sizes.get(key, 0) <= cap:
                    current.append(line)
                    sizes[key] = sizes.get(key, 0) + len(line)
    return {k: cut("".join(v).rstrip("\n"), cap) for k, v in out.items() if v}


def requests_of(
    replay: Path, seat: int, turns: set[int]
) -> dict[tuple[int, str], tuple[dict[str, Any], bool]]:
    """The ``/act`` bodies sent to `seat` at `turns`, by (turn, request id):
    the body and whether its rebuilt state matches the recorded hash."""
    record = read_replay(replay)
    header = record.header
    last: dict[int, int] = {}
    found: dict[tuple[int, str], tuple[dict[str, Any], bool]] = {}
    for step in steps(record, keep_sent=True):
        line, sent = step.line, step.sent
        assert sent is not None
        since = last.get(line.seat, 0)
        last[line.seat] = len(sent.events)
        if line.seat != seat or line.turn not in turns:
            continue
        state = view(sent, seat, since)
        body = {
            "apiversion": APIVERSION,
            "game_id": header.game_id,
            "request_id": line.request_id,
            "seat": seat,
            "turn": line.turn,
            "deadline_ms": header.timeouts.move_ms,
            "state": msgspec.to_builtins(state),
            "legal": msgspec.to_builtins(sent.legal_actions(seat)),
        }
        found[(line.turn, line.request_id)] = (body, state_hash(ENCODER.encode(state)) == line.state_sha256)
    return found


def diagnose(
    out_dir: Path,
    bot: str,
    *,
    log_paths: Sequence[Path] = (),
    max_faults: int = MAX_FAULTS,
    log_cap: int = LOG_CAP,
) -> BotDiagnostics:
    """What the run in `out_dir` says about `bot` (blocking: reads its database and replays)."""
    games: list[GamePlayed] = []
    latencies: list[float] = []
    faults: list[FaultReport] = []
    count = 0
    replays: dict[int, Path] = {}
    store = existing_store(out_dir)
    if store is not None:
        with store:
            played = store.seat_results(bot)  # its seat's part of each result only
            fault_rows = store.faults_of(bot)
        ids: dict[int, str] = {}
        for p in played:
            latencies += p.latencies_ms
            games.append(
                GamePlayed(
                    game=p.index,
                    seat=p.seat,
                    place=p.place,
                    faults=p.faults,
                    has_replay=p.replay is not None,
                )
            )
            ids[p.index] = p.game_id
            if p.replay is not None:
                replays[p.index] = out_dir / p.replay
        count = len(fault_rows)
        wanted: dict[int, list[tuple[int, str, int, str]]] = {}
        for f in fault_rows[:max_faults]:
            wanted.setdefault(f.game, []).append((f.seat, f.kind, f.turn, f.detail))
        for game_idx, items in wanted.items():
            bodies: dict[tuple[int, str], tuple[dict[str, Any], bool]] = {}
            path = replays.get(game_idx)
            act_turns = {turn for _, _, turn, detail in items if not detail.startswith(("/start", "/end"))}
            if path is not None and act_turns:
                with contextlib.suppress(ReplayError, OSError, ValueError):
                    bodies = requests_of(path, items[0][0], act_turns)
            used: set[tuple[int, str]] = set()
            for seat, kind, turn, detail in items:
                match = next(((k, v) for k, v in bodies.items() if k[0] == turn and k not in used), None)
                report = FaultReport(game=game_idx, seat=seat, turn=turn, kind=kind, detail=detail)
                if match is not None and not detail.startswith(("/start", "/end")):
                    used.add(match[0])
                    report.request, report.verified = match[1]
                faults.append(report)
    by_game = output_by_game(log_paths)
    for g in games[-GAMES_WITH_OUTPUT:]:
        text = by_game.get(ids.get(g.game, ""), "")
        g.output = text if len(text) <= GAME_OUTPUT_CAP else "…" + text[-GAME_OUTPUT_CAP:]
    return BotDiagnostics(
        bot=bot,
        games=games,
        fault_count=count,
        faults=faults,
        latency=latency_stats(ordered := sorted(latencies)),  # sorted once: its stats sort it again in O(n)
        histogram=_histogram(ordered),
        log=last_lines(without_marks("\n".join(tail_of(p, log_cap) for p in log_paths)), log_cap),
    )
