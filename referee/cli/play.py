"""``referee play``: a local game against the house bots, for a bot or for a person.

``referee play BOT --against house-greedy [--against ...]`` plays the bot BOT
(a SPEC as ``referee match`` takes it: a URL, ``unix:/path``, or ``cmd:``
with ``{port}``) against house bots (the sample bots, run by this
interpreter), writes each game's replay (the tournaments' format, which
``referee replay`` and the viewer read) and prints one line per game: its
seed, the places, the faults, where the replay is.

``referee play --human --against ...`` seats the person at the terminal
instead: a :class:`~referee.bots.human.HumanSeat` driven by
:func:`terminal_front_end`, which prints the view a bot at that seat would
get (from the very bytes of its request) as text, numbers the legal actions
and reads a choice from stdin. The person has the league's time per move
(:func:`~referee.bots.human.human_timeouts`: 60 s unless told) and the usual
fault policy: a late answer is a timeout fault, and closing stdin leaves the
game (the safe default plays for the seat until the policy disqualifies it).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TextIO

import click

from protocol.codec import decode_act_request, decode_game_end, decode_game_start
from protocol.messages import (
    Action,
    ActRequest,
    ChooseUp,
    Draw,
    Event,
    Flip,
    Pass,
    Pickup,
    Play,
    Rules,
    Swap,
    Timeouts,
)
from referee.bots import Bot, BotError, make_session
from referee.bots.factory import BotFactory, BotSpec, parse_spec
from referee.bots.house import BUILTIN_BOTS, HOUSE_PREFIX, builtin_spec
from referee.bots.human import HumanSeat, Prompt, human_timeouts
from referee.match import Match
from referee.record import FaultPolicy, MatchResult
from referee.replay import write as write_replay
from referee.textsafe import for_terminal

__all__ = ["HOUSE_BOTS", "house_spec", "play", "terminal_front_end"]

#: The house bots ``--against`` names: the built-in ones (:data:`referee.bots.house.BUILTIN_BOTS`).
HOUSE_BOTS: Final = [f"{HOUSE_PREFIX}{b}" for b in BUILTIN_BOTS]


def house_spec(name: str, seat_name: str | None = None) -> BotSpec:
    """The house bot `name` (``house-greedy``, or ``greedy`` for short) as a
    command bot of this interpreter. Raises ``ValueError`` naming the house
    bots when there is no such one."""
    key = name.removeprefix(HOUSE_PREFIX)
    if key not in BUILTIN_BOTS:
        raise ValueError(f"{name!r} is not a house bot: the house bots are {', '.join(HOUSE_BOTS)}")
    return builtin_spec(key, seat_name or f"{HOUSE_PREFIX}{key}")


def _seat_names(names: Sequence[str]) -> list[str]:
    """`names` with a number after each one that is there more than once."""
    count: dict[str, int] = {}
    for n in names:
        count[n] = count.get(n, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if count[n] > 1:
            seen[n] = seen.get(n, 0) + 1
            out.append(f"{n}-{seen[n]}")
        else:
            out.append(n)
    return out


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# ------------------------------------------------------------- the terminal


class LineReader:
    """The lines of `stream`, read by a daemon thread (a blocked read never
    keeps the process alive) into a queue; None once the stream ends."""

    def __init__(self, stream: TextIO) -> None:
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def pump() -> None:
            while True:
                try:
                    line = stream.readline()
                except (OSError, ValueError):
                    line = ""
                loop.call_soon_threadsafe(self.lines.put_nowait, line or None)
                if not line:
                    return

        threading.Thread(target=pump, name="stdin", daemon=True).start()


def action_text(action: Action) -> str:
    """An action as a person reads it."""
    if isinstance(action, Play):
        return f"play {' '.join(action.cards)}"
    if isinstance(action, ChooseUp):
        return f"put {' '.join(action.cards)} as your 3UP"
    if isinstance(action, Pickup):
        return "pick up the pile"
    if isinstance(action, Flip):
        return f"turn over your 3DOWN card in slot {action.slot}"
    if isinstance(action, Draw):
        return "draw a card"
    if isinstance(action, Swap):
        whose = f"seat {action.target}'s" if action.target is not None else "your"
        return f"swap {action.give} from your hand for {action.take} from {whose} 3UP"
    if isinstance(action, Pass):
        return "pass (no swap)"
    return type(action).__name__.lower()


def _event_text(e: Event, names: Sequence[str], me: int) -> str | None:
    who = "you" if e.seat == me else (names[e.seat] if 0 <= e.seat < len(names) else f"seat {e.seat}")
    cards = " ".join(e.cards or [])
    kind = e.type
    if kind == "play":
        return f"{who} played {cards}"
    if kind == "pickup":
        return f"{who} picked up the pile ({e.count} card{'s' if e.count != 1 else ''})"
    if kind == "draw":
        return f"{who} drew {e.count} card{'s' if e.count != 1 else ''}"
    if kind == "flip":
        if e.kind == "played":
            return f"{who} turned over {cards} from 3DOWN and played it"
        return f"{who} turned over a 3DOWN card that could not be played{f' ({cards})' if cards else ''}"
    if kind == "clear":
        return f"the pile was cleared ({e.kind})"
    if kind == "choose_up":
        return f"{who} chose 3UP {cards}"
    if kind == "out":
        return f"{who} went out, {_ordinal(e.place or 0)}"
    if kind == "reverse":
        return "the direction of play turned"
    if kind == "swap":
        return f"{who} swapped {' for '.join(e.cards or [])}"
    if kind == "pile_swap":
        return f"{who} and seat {e.target} exchanged their 3UP and 3DOWN"
    if kind == "pass":
        return f"{who} passed"
    if kind == "fault":
        return f"{who}: fault ({e.detail or e.kind})"
    if kind == "disqualified":
        return f"{who} disqualified: {e.detail}"
    if kind == "end":
        return "the game ended" + (" (adjudicated at the turn limit)" if e.detail == "adjudicated" else "")
    return None


def render_request(request: ActRequest) -> str:
    """The view of an ``/act`` request as text: what happened since the seat's
    last move, the table, the seat's cards and the legal actions numbered
    from 1. Only the request's own fields are shown (nothing a bot would not get)."""
    s = request.state
    me = request.seat
    names = [p.name for p in s.players]
    lines: list[str] = []
    happened = [t for t in (_event_text(e, names, me) for e in s.events) if t]
    if happened:
        lines.append("since your last move:")
        lines += [f"  {t}" for t in happened]
    clock = f"{request.deadline_ms / 1000:g} s to answer"
    if request.bank_ms is not None:
        clock += f" (+ a time bank of {request.bank_ms / 1000:g} s)"
    lines.append(f"--- turn {request.turn}, {s.phase}: your move (seat {me}), {clock}")
    top = f"   top {s.pile[-1]}" if s.pile else ""
    lines.append(f"pile ({len(s.pile)}): {' '.join(s.pile) or 'empty'}{top}")
    lines.append(
        f"draw pile: {s.draw_count}   cleared: {len(s.cleared)}"
        + (f"   removed: {s.removed_count}" if s.removed_count else "")
        + ("   direction reversed" if s.direction < 0 else "")
    )
    for p in s.players:
        if p.seat == me:
            continue
        if p.out:
            status = "disqualified" if p.disqualified else f"out, {_ordinal(p.place or 0)}"
            lines.append(f"  seat {p.seat} {p.name}: {status}")
            continue
        known = f" (known: {' '.join(p.known)})" if p.known else ""
        lines.append(
            f"  seat {p.seat} {p.name}: {p.hand_count} in hand{known}, "
            f"3UP {' '.join(p.up) or '-'}, 3DOWN {p.down_count}"
        )
    you = s.you
    lines.append(f"your hand: {' '.join(you.hand) or '-'}")
    lines.append(f"your 3UP:  {' '.join(you.up) or '-'}")
    lines.append(f"your 3DOWN: {len(you.down)} face down (slots {' '.join(map(str, you.down)) or '-'})")
    if s.extra_actions:
        lines.append(f"extra actions owed: {s.extra_actions}")
    lines.append("legal actions:")
    lines += [f"  {i}) {action_text(a)}" for i, a in enumerate(request.legal, start=1)]
    return "\n".join(lines)


def parse_choice(line: str, count: int) -> int | str:
    """The index (from 0) chosen by `line` (a number from 1 to `count`), or
    what to tell the person."""
    text = line.strip()
    if not text:
        return f"type the number of an action, 1 to {count}"
    try:
        n = int(text)
    except ValueError:
        return f"{text[:20]!r} is not a number: type the number of an action, 1 to {count}"
    if not 1 <= n <= count:
        return f"{n} is not one of the actions: choose 1 to {count}"
    return n - 1


async def terminal_front_end(seat: HumanSeat, lines: LineReader, say: Callable[[str], None]) -> None:
    """Drive `seat` from a terminal: print each prompt's view, read a choice
    for each ``act`` prompt from `lines`, until the game's ``end`` prompt or
    the end of input (then the person leaves the seat)."""
    names: list[str] = []
    while True:
        prompt = await seat.prompts.get()
        if prompt.kind == "start":
            start = decode_game_start(prompt.body)
            names = list(start.players)
            others = ", ".join(n for i, n in enumerate(names) if i != start.seat)
            say(
                f"you are seat {start.seat} of {len(names)} against {others}; "
                f"{start.timeouts.move_ms / 1000:g} s a move. Type the number of your choice."
            )
            continue
        if prompt.kind == "end":
            end = decode_game_end(prompt.body)
            place = end.places[end.seat]
            say(f"game over: you placed {_ordinal(place)} of {len(end.places)}")
            return
        if not await _ask(prompt, lines, say):
            seat.leave()
            say(
                "input closed: you left the game. Your seat plays the safe default until the fault "
                "policy disqualifies it; the game goes on to its end."
            )
            return


async def _ask(prompt: Prompt, lines: LineReader, say: Callable[[str], None]) -> bool:
    """Show one ``act`` prompt and answer it from `lines`; False at the end of input."""
    request = decode_act_request(prompt.body)
    say(render_request(request))
    count = len(request.legal)
    settled = asyncio.ensure_future(prompt.settled())
    try:
        while True:
            say(f"your choice (1-{count}):")
            line_task = asyncio.ensure_future(lines.lines.get())
            await asyncio.wait({line_task, settled}, return_when=asyncio.FIRST_COMPLETED)
            if not line_task.done():  # the prompt closed first: its time ran out
                line_task.cancel()
                say(
                    f"time is up ({prompt.limit_s:g} s): the referee played the safe default for you "
                    "and counted a timeout fault"
                )
                return True
            line = line_task.result()
            if line is None:
                return False
            choice = parse_choice(line, count)
            if isinstance(choice, str):
                say(choice)
                continue
            if prompt.choose(choice):
                say(f"you: {action_text(request.legal[choice])}")
            else:
                say("too late: the referee already played the safe default for you")
            return True
    finally:
        settled.cancel()


# ------------------------------------------------------------------ the games


def _next_index(out: Path) -> int:
    """The number of the next game file in `out` (after those already there)."""
    taken = [
        int(p.name[len("game-") : -len(".jsonl.gz")])
        for p in out.glob("game-*.jsonl.gz")
        if p.name[len("game-") : -len(".jsonl.gz")].isdigit()
    ]
    return max(taken, default=0) + 1


def game_line(number: int, result: MatchResult, player: int, replay: Path) -> str:
    """One game in one line: its seed, each seat's place (the player's
    marked), the player's faults, and where its replay is."""
    places = ", ".join(
        f"{_ordinal(place)} {name}" + ("*" if seat == player else "")
        for seat, (name, place) in sorted(
            enumerate(zip(result.names, result.places)), key=lambda item: item[1][1]
        )
    )
    faults = result.faults[player]
    dq = ", disqualified" if player in result.disqualified else ""
    kinds = f" ({', '.join(sorted({f.kind for f in faults}))})" if faults else ""
    adjudicated = ", adjudicated" if result.adjudicated else ""
    return (
        f"game {number} seed {result.seed}: {places}; {result.turns} turns{adjudicated}; "
        f"{result.names[player]}: {len(faults)} faults{kinds}{dq} -> {replay}"
    )


async def _play_games(
    player: BotSpec | None,
    human: str | None,
    opponents: Sequence[BotSpec],
    *,
    seed: int,
    games: int,
    rules: Rules,
    timeouts: Timeouts,
    policy: FaultPolicy,
    out: Path,
    log_dir: Path,
    say: Callable[[str], None],
) -> None:
    """Start the bots, play `games` deals (the player at seat 0, then 1...),
    write each replay into `out` and print a line per game."""
    async with contextlib.AsyncExitStack() as stack:
        session = make_session()
        stack.push_async_callback(session.close)
        factory = BotFactory(log_dir=log_dir, session=session)
        specs = ([player] if player is not None else []) + list(opponents)
        bots: list[Bot] = []
        for spec in specs:
            bot = factory.make(spec)
            stack.push_async_callback(bot.close)
            bots.append(bot)
        ready = await asyncio.gather(*(b.handshake() for b in bots), return_exceptions=True)
        problems = [f"{spec.name}: {r}" for spec, r in zip(specs, ready) if isinstance(r, BaseException)]
        for r in ready:
            if isinstance(r, BaseException) and not isinstance(r, BotError):
                raise r
        if problems:
            raise click.ClickException(for_terminal("cannot start the game:\n" + "\n".join(problems)))
        names = _seat_names([b.name for b in bots])
        seat_of_human: HumanSeat | None = None
        if human is not None:
            seat_of_human = HumanSeat(human)
            bots.insert(0, seat_of_human)
            names.insert(0, human)
        n = len(bots)
        number = _next_index(out)
        lines = LineReader(sys.stdin) if seat_of_human is not None else None
        for game in range(games):
            shift = game % n  # the player (seat 0 of the list) sits at seat `shift`
            order = list(range(n))[-shift:] + list(range(n))[:-shift] if shift else list(range(n))
            match = Match(
                [bots[i] for i in order],
                seed + game,
                rules=rules,
                timeouts=timeouts,
                policy=policy,
                names=[names[i] for i in order],
            )
            front: asyncio.Task[None] | None = None
            if seat_of_human is not None and lines is not None and not seat_of_human.left:
                front = asyncio.create_task(terminal_front_end(seat_of_human, lines, say))
            try:
                result = await match.play()
            finally:
                replay = out / f"game-{number:06d}.jsonl.gz"
                await asyncio.to_thread(write_replay, match.record, replay)
            if front is not None:
                await front
            say(game_line(number, result, order.index(0), replay))
            number += 1


def _opponents(against: Sequence[str]) -> list[BotSpec]:
    names = []
    for name in against:
        try:
            names.append(house_spec(name).name)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--against") from None
    return [house_spec(name, seat) for name, seat in zip(names, _seat_names(names))]


@click.command()
@click.argument("bot", required=False, metavar="[BOT]")
@click.option(
    "--human", is_flag=True, help="Take a seat yourself: the view as text, your choices from stdin."
)
@click.option(
    "--against",
    multiple=True,
    required=True,
    metavar="HOUSE",
    help=f"A house bot to play against, once per seat: {', '.join(HOUSE_BOTS)}.",
)
@click.option("--seed", type=int, help="The first deal's seed (default: a random one, printed).")
@click.option(
    "--games",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Deals, the player moving seat.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("games"),
    show_default=True,
    help="The folder of the replays (game-NNNNNN.jsonl.gz, numbered after those there).",
)
@click.option(
    "--league",
    "league_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Play under this league file's rules, timeouts and fault policy.",
)
@click.option(
    "--move-ms",
    type=click.IntRange(min=1),
    help="Time for each move (default: the league's; 60000 for a person, or the league's if longer).",
)
@click.option("--name", default="you", show_default=True, help="Your seat's name with --human.")
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the bots' stdout and stderr go (default: a new temporary folder).",
)
def play(
    bot: str | None,
    human: bool,
    against: tuple[str, ...],
    seed: int | None,
    games: int,
    out: Path,
    league_file: Path | None,
    move_ms: int | None,
    name: str,
    log_dir: Path | None,
) -> None:
    """Play a local game against the house bots and keep its replay.

    BOT is your bot, as `referee match` takes it (http://127.0.0.1:8001,
    unix:/path.sock, or 'cmd:python bot.py --port {port}'); or --human to
    play yourself at the terminal. One line per game: the places (yours
    marked *), your faults, the replay (`referee replay FILE --html OUT.html`
    shows it step by step).
    """
    if (bot is None) == (not human):
        raise click.UsageError(
            "give your BOT (a URL or 'cmd:COMMAND') to play it, or --human to play yourself"
            if bot is None
            else "give either BOT or --human: one player against the house bots"
        )
    player: BotSpec | None = None
    if bot is not None:
        try:
            player = parse_spec(bot)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="BOT") from None
    opponents = _opponents(against)
    rules, timeouts, policy = Rules(), Timeouts(), FaultPolicy()
    if league_file is not None:
        from referee.tournament.league import LeagueError, load_league

        try:
            league = load_league(league_file)
        except LeagueError as e:
            raise click.UsageError(str(e)) from None
        rules, timeouts, policy = league.rules, league.timeouts, league.faults
    if human:
        if name in {o.name for o in opponents}:
            raise click.BadParameter(
                f"{name!r} is a house bot's name here: choose another", param_hint="--name"
            )
        timeouts = human_timeouts(timeouts, move_ms)
        if any(o.command and "sample_bots.searcher" in o.command for o in opponents):
            # every seat of a game has the same clock, and the searcher thinks for most of it
            click.echo(
                f"note: house-searcher thinks for about half of each move's time "
                f"({timeouts.move_ms / 1000:g} s here): --move-ms 10000 makes it quicker",
                err=True,
            )
    elif move_ms is not None:
        timeouts = Timeouts(
            move_ms=move_ms, bank_ms=timeouts.bank_ms, start_ms=timeouts.start_ms, end_ms=timeouts.end_ms
        )
    try:
        rules.validate(1 + len(opponents))
    except ValueError as e:
        raise click.UsageError(f"{e} (one player and {len(opponents)} --against)") from None
    if seed is None:
        seed = random.randrange(2**31)
    out.mkdir(parents=True, exist_ok=True)
    logs = log_dir if log_dir is not None else Path(tempfile.mkdtemp(prefix="referee-logs-"))

    def say(text: str) -> None:
        click.echo(for_terminal(text))

    try:
        asyncio.run(
            _play_games(
                player,
                name if human else None,
                opponents,
                seed=seed,
                games=games,
                rules=rules,
                timeouts=timeouts,
                policy=policy,
                out=out,
                log_dir=logs,
                say=say,
            )
        )
    except KeyboardInterrupt:
        say(f"interrupted: the games played so far are in {out}")
        sys.exit(130)
