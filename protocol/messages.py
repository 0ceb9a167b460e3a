"""The messages of the bot protocol, version 1 (PROTOCOL.md), as msgspec Structs.

Every field named in PROTOCOL.md exists here with exactly that name; fields the
project added are extensions and all have defaults, so a message written against
PROTOCOL.md alone decodes. Class docstrings end up as ``description`` in the
JSON Schema (``protocol/schema/``), so they are written for bot authors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Final

import msgspec
from msgspec import Meta

from .cards import CLEARS, COLOURS, MAX_NUMBER_RANK

__all__ = [
    "ACTION_TYPES",
    "APIVERSION",
    "CLEAR_KINDS",
    "DECK_PRESETS",
    "EVENT_TYPES",
    "FAULT_KINDS",
    "MAX_PLAYERS",
    "MIN_CARDS_PER_PLAYER",
    "MIN_PLAYERS",
    "PHASES",
    "ActReply",
    "ActRequest",
    "Action",
    "BotInfo",
    "ChooseUp",
    "Deck",
    "Draw",
    "Event",
    "Fault",
    "Flip",
    "GameEnd",
    "GameStart",
    "Pass",
    "Pickup",
    "Play",
    "PlayerView",
    "Rules",
    "State",
    "Swap",
    "Timeouts",
    "YouView",
    "check_reply",
]

#: The protocol version every message carries in ``apiversion``.
APIVERSION: Final = "1"

MIN_PLAYERS: Final = 2
MAX_PLAYERS: Final = 6
#: 3 DOWN + 3 UP + 3 in hand (RULES.md section 1).
MIN_CARDS_PER_PLAYER: Final = 9

#: ``type`` of each action, in the order of the ``Action`` union.
ACTION_TYPES: Final = ("choose_up", "play", "flip", "pickup", "draw", "swap", "pass")

#: Every ``Event.type`` the referee emits (see ``Event``). Bots must ignore
#: types they do not know: the project may add more.
EVENT_TYPES: Final = (
    "choose_up",
    "pile_swap",
    "swap",
    "pass",
    "play",
    "flip",
    "pickup",
    "draw",
    "clear",
    "reverse",
    "out",
    "disqualified",
    "fault",
    "end",
)

#: ``Event.kind`` of a ``clear`` event: what cleared the pile (RULES.md section 5).
CLEAR_KINDS: Final = ("clear", "clear+1", "clear+2", "three")

#: ``Fault.kind`` (and ``Event.kind`` of a ``fault`` event); see ``Fault``.
FAULT_KINDS: Final = (
    "timeout",
    "http_status",
    "bad_json",
    "too_large",
    "wrong_request_id",
    "illegal",
    "connection",
)

#: ``State.phase`` values.
PHASES: Final = ("setup", "sabotage", "play", "over")


# --------------------------------------------------------------------------
# Actions: a tagged union on "type". Frozen, and hashable: `cards` accepts any
# sequence of card strings (a list on the wire) and is stored as a tuple, so
# Play(cards=["5R"]) == Play(cards=("5R",)) and both hash alike.
# --------------------------------------------------------------------------


def _tuple_cards(action: ChooseUp | Play) -> None:
    cards = action.cards
    if isinstance(cards, str):
        raise TypeError(f"cards must be a sequence of card strings, not the string {cards!r}")
    if not isinstance(cards, tuple):
        msgspec.structs.force_setattr(action, "cards", tuple(cards))


class ChooseUp(msgspec.Struct, frozen=True, tag_field="type", tag="choose_up"):
    """Set-up: the 3 cards, out of the 6 dealt, to lay face up as 3UP (RULES 2, [D2])."""

    cards: Sequence[str]  # stored as a tuple

    def __post_init__(self) -> None:
        _tuple_cards(self)


class Play(msgspec.Struct, frozen=True, tag_field="type", tag="play"):
    """Play cards of one rank from the current source (RULES 3-4; a Clear is played alone, [D5]).

    `legal` lists one play per (rank, count) with a canonical choice of colours;
    any other cards of that rank and count from the same source are accepted.
    """

    cards: Sequence[str]  # stored as a tuple

    def __post_init__(self) -> None:
        _tuple_cards(self)


class Flip(msgspec.Struct, frozen=True, tag_field="type", tag="flip"):
    """Blind 3DOWN play of the card in `slot` (0, 1 or 2) (RULES 4, [D6], [D7])."""

    slot: int


class Pickup(msgspec.Struct, frozen=True, tag_field="type", tag="pickup"):
    """Take the discard pile into the hand; legal only when no play is (RULES 4)."""


class Draw(msgspec.Struct, frozen=True, tag_field="type", tag="draw"):
    """Draw 1 card: before an extra action (RULES 5, [D10], V8) or instead of playing (V2)."""


class Swap(msgspec.Struct, frozen=True, tag_field="type", tag="swap"):
    """Give the hand card `give` to a 3UP row and take that row's 3UP card `take` into the hand.

    `target` absent/null: your own 3UP (V6 colour run, [D17]). `target` a seat:
    that player's 3UP (V5b sabotage, [D16]).
    """

    give: str
    take: str
    target: int | None = None


class Pass(msgspec.Struct, frozen=True, tag_field="type", tag="pass"):
    """Decline the V6 colour-run swap or the V5b sabotage swap."""


#: An action; ``type`` says which.
Action = ChooseUp | Play | Flip | Pickup | Draw | Swap | Pass


# --------------------------------------------------------------------------
# Configuration: deck, rules, timeouts. On the wire unknown fields are
# accepted, so a bot built on an older protocol/ still decodes a GameStart
# from a newer referee; league files are checked strictly by the referee's
# loader, so a misspelt variant there is an error rather than silently off.
# --------------------------------------------------------------------------


class Deck(msgspec.Struct, frozen=True, kw_only=True):
    """A deck composition (RULES 1, [D1]; fewer colours is variant V7).

    `colours`: the colour letters in use, 1 to 7 distinct letters of ROYGBIV in
    any order. `copies`: copies of each rank 1..10 per colour. `clear`,
    `clear_plus1`, `clear_plus2`: how many Clear, Clear+1, Clear+2 cards the
    whole deck holds.
    """

    colours: str = COLOURS  # letters of ROYGBIV in use; V7 smaller deck = fewer
    copies: int = 1  # copies of each rank 1..10 per colour
    clear: int = 7  # number of "C" in the deck [D1]
    clear_plus1: int = 6  # number of "C+1" in the deck [D1]
    clear_plus2: int = 1  # number of "C+2" in the deck [D1]

    def size(self) -> int:
        """Number of cards in the deck (84 for the default deck, [D1])."""
        return (
            len(self.colours) * MAX_NUMBER_RANK * self.copies
            + self.clear
            + self.clear_plus1
            + self.clear_plus2
        )

    def cards(self) -> list[str]:
        """Every card of the deck, unshuffled: numbers by colour then rank, then Clears."""
        out = [
            f"{rank}{colour}"
            for colour in self.colours
            for rank in range(1, MAX_NUMBER_RANK + 1)
            for _ in range(self.copies)
        ]
        for card, count in zip(CLEARS, (self.clear, self.clear_plus1, self.clear_plus2)):
            out.extend([card] * count)
        return out

    def problems(self) -> list[str]:
        """What is wrong with this deck on its own, one message per problem (empty: fine)."""
        found: list[str] = []
        bad = sorted({c for c in self.colours if c not in COLOURS}, key=self.colours.index)
        repeated = sorted({c for c in self.colours if self.colours.count(c) > 1}, key=self.colours.index)
        if not self.colours or bad or repeated:
            why = []
            if not self.colours:
                why.append("it is empty")
            if bad:
                why.append("not colour letters: " + ", ".join(repr(c) for c in bad))
            if repeated:
                why.append("repeated: " + ", ".join(repr(c) for c in repeated))
            found.append(
                f"deck colours must be 1 to 7 distinct letters of {COLOURS}, "
                f"got {self.colours!r} ({'; '.join(why)})"
            )
        if self.copies < 1:
            found.append(f"deck copies must be at least 1, got {self.copies}")
        for name in ("clear", "clear_plus1", "clear_plus2"):
            value = getattr(self, name)
            if value < 0:
                found.append(f"deck {name} must be 0 or more, got {value}")
        return found

    def validate(self) -> None:
        """Raise ``ValueError`` naming every problem of this deck."""
        found = self.problems()
        if found:
            raise ValueError("; ".join(found))


#: Named decks usable as ``Rules.deck``.
DECK_PRESETS: Final[dict[str, Deck]] = {
    # [D1] the component list of the 3-translation sheet: 84 cards.
    "standard": Deck(),
    # The 002 sheet: 3 colours x 2 copies x 1..10, 2 C and 2 C+1 per colour,
    # 2 C+2: 74 cards.
    "italian": Deck(colours="RYG", copies=2, clear=6, clear_plus1=6, clear_plus2=2),
}


class Rules(msgspec.Struct, kw_only=True):
    """The deck and the variants in force (RULES.md; every variant is off by default).

    `deck`: a preset name ("standard" [D1], "italian") or a Deck. The booleans
    switch variants V1..V8 on. `turn_limit`: turns after which the game is
    adjudicated [D12].
    """

    deck: str | Deck = "standard"  # [D1] preset name or Deck; V7 = fewer colours
    play_for_places: bool = False  # V1 play for places: go on after the first out [D11]
    draw_instead_of_playing: bool = False  # V2 draw 1 instead of playing
    reverses: bool = False  # V3 a play containing 1s turns the direction [D13]
    scoring: bool = False  # V4 score the cards still held [D14]
    pile_swap: bool = False  # V5 two random players exchange 3UP+3DOWN [D15]
    sabotage: bool = False  # V5b swap a hand card with another's 3UP card [D16]
    colour_run: bool = False  # V6 4 of one colour on top: may swap own 3UP/hand [D17]
    one_draw_per_clear2: bool = False  # V8 draw only before the first extra action [D10]
    turn_limit: int = 1000  # [D12] turns before the game is adjudicated

    def resolved_deck(self) -> Deck:
        """The Deck in force: the preset named by `deck`, or `deck` itself.

        Raises ``ValueError`` naming the presets for an unknown preset name.
        """
        if isinstance(self.deck, Deck):
            return self.deck
        try:
            return DECK_PRESETS[self.deck]
        except KeyError:
            raise ValueError(
                f"unknown deck preset {self.deck!r}; presets: "
                + ", ".join(sorted(DECK_PRESETS))
                + " (or give a deck table: colours, copies, clear, clear_plus1, clear_plus2)"
            ) from None

    def validate(self, players: int) -> None:
        """Check these rules for a game of `players` players, before it starts.

        Raises ``ValueError`` with every problem found, joined by "; ".
        """
        found: list[str] = []
        if not MIN_PLAYERS <= players <= MAX_PLAYERS:
            found.append(f"a game needs {MIN_PLAYERS} to {MAX_PLAYERS} players, got {players}")
        if self.turn_limit < 1:
            found.append(f"turn_limit must be at least 1, got {self.turn_limit}")
        try:
            deck = self.resolved_deck()
        except ValueError as e:
            found.append(str(e))
        else:
            deck_problems = deck.problems()
            found.extend(deck_problems)
            if not deck_problems and players >= 1:
                size = deck.size()
                need = MIN_CARDS_PER_PLAYER * players
                if size < need:
                    found.append(
                        f"a deck of {size} cards is too small for {players} players: "
                        f"3UP 3DOWN needs at least {MIN_CARDS_PER_PLAYER} cards per "
                        f"player ({need})"
                    )
        if found:
            raise ValueError("; ".join(found))


class Timeouts(msgspec.Struct, kw_only=True):
    """Time limits, in milliseconds.

    `move_ms`: time for each /act reply, round trip included. `bank_ms`: the
    time bank (0: none; what is left is sent as ActRequest.bank_ms). `start_ms`,
    `end_ms`: time for the /start and /end replies.
    """

    move_ms: int = 1000
    bank_ms: int = 0
    start_ms: int = 5000
    end_ms: int = 2000


# --------------------------------------------------------------------------
# The view of the game sent with each request (RULES.md section 8).
# --------------------------------------------------------------------------


class Event(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Something that happened, as this seat may see it. Fields that do not apply are absent.

    `seq` numbers the events of the game in order; `seat` is the player
    concerned. Types (bots must ignore types they do not know):

    - `choose_up`: `cards` = the 3UP that seat chose; emitted for every seat once
      all have chosen [D2].
    - `pile_swap`: `seat` and `target` exchanged their 3UP and 3DOWN (V5, [D15]).
    - `swap`: `cards` = [give, take]; `target` = the seat whose 3UP card was
      taken (V5b, [D16]), absent for the seat's own 3UP (V6, [D17]).
    - `pass`: the seat declined a V5b / V6 swap.
    - `play`: `cards` played.
    - `flip`: `slot` flipped; `kind` = "played" or "failed" (too low: the seat
      picked up the pile and the card); `cards` = [card] when it was played. For
      a failed flip `cards` is present only in the flipping seat's own view [D6].
    - `pickup`: `count` cards taken from the discard pile.
    - `draw`: `count` cards drawn from the draw pile (cards never shown).
    - `clear`: the pile was cleared; `kind` = "clear", "clear+1", "clear+2" or
      "three" (three of a kind, [D8]).
    - `reverse`: the direction of play turned (V3, [D13]).
    - `out`: the seat went out, finishing in `place` (1 = first).
    - `disqualified`: the seat was disqualified; `detail` says why.
    - `fault`: the seat's bot faulted; `kind` = the fault kind (see Fault),
      `detail` says what.
    - `end`: the game ended; `detail` = "adjudicated" when it hit the turn
      limit [D12], absent otherwise.
    """

    seq: int
    seat: int
    type: str
    cards: list[str] | None = None
    slot: int | None = None
    count: int | None = None
    target: int | None = None
    place: int | None = None
    kind: str | None = None
    detail: str | None = None


class YouView(msgspec.Struct, kw_only=True):
    """The requesting seat's own cards: `hand`, `up` (3UP), and `down`, the 3DOWN slots still face down."""

    seat: int
    hand: list[str]
    up: list[str]
    down: list[int]


class PlayerView(msgspec.Struct, kw_only=True):
    """What everyone may see of one player (RULES 8).

    `hand_count`: cards in hand. `up`: 3UP cards. `down_count`: 3DOWN cards left,
    `down`: which slots. `out`: no longer playing (went out, or was disqualified); `place`: final
    place once known, else null. `known`: cards publicly known to be in that
    player's hand (from discard piles it picked up, not since played).
    `disqualified`: disqualified by the referee.
    """

    seat: int
    name: str
    hand_count: int
    up: list[str]
    down_count: int
    out: bool
    place: int | None
    down: list[int] = msgspec.field(default_factory=list)
    known: list[str] = msgspec.field(default_factory=list)
    disqualified: bool = False


class State(msgspec.Struct, kw_only=True):
    """The requesting seat's view of the game: exactly what RULES 8 lets it see.

    `players` is by seat. `pile`: the discard pile, bottom to top. `draw_count`:
    cards left in the draw pile. `cleared`: cards cleared out of the game (face
    up). `removed_count`: cards that left the game face down (a disqualified
    player's). `current`: the seat to act. `direction`: 1 (seat order) or -1
    (V3). `extra_actions`: extra actions the current player owes, counting the
    one being asked for (0 outside a Clear+1/+2 follow-up). `events`: events
    since this seat's previous request. `phase`: "setup", "sabotage", "play" or
    "over". `turn`: as ActRequest.turn. `pending`: "swap" while the V6
    colour-run swap is being offered, else null.
    """

    you: YouView
    players: list[PlayerView]
    pile: list[str]
    draw_count: int
    cleared: list[str]
    removed_count: int
    current: int
    direction: int
    extra_actions: int
    events: list[Event]
    phase: str = "play"
    turn: int = 0
    pending: str | None = None


# --------------------------------------------------------------------------
# Messages.
# --------------------------------------------------------------------------


class BotInfo(msgspec.Struct, kw_only=True):
    """Reply to `GET /`: health check and identity."""

    apiversion: str
    name: str
    author: str = ""
    version: str = ""


class GameStart(msgspec.Struct, kw_only=True):
    """Body of `POST /start`. `game_id` is opaque (reveals nothing about the deal); `players` = names by seat."""

    apiversion: str
    game_id: str
    seat: int
    players: list[str]
    rules: Rules
    timeouts: Timeouts


class ActRequest(msgspec.Struct, kw_only=True):
    """Body of `POST /act`: the referee asks this seat for an action.

    Reply with the same `request_id` and either `index` (into `legal`) or
    `action`. `turn` counts turns from 1 (the set-up choice is turn 0; extra
    actions and draws keep their turn's number). `deadline_ms`: time for this
    reply, round trip included. `bank_ms`: time bank left (null: no bank).
    `legal`: every legal action, never empty.
    """

    apiversion: str
    game_id: str
    request_id: str
    seat: int
    turn: int
    deadline_ms: int
    bank_ms: int | None
    state: State
    legal: Annotated[list[Action], Meta(min_length=1)]


class ActReply(msgspec.Struct, kw_only=True):
    """Reply to `POST /act`: `request_id` echoed, and exactly one of `index` (into `legal`) or `action`.

    Other top-level fields are ignored (bots may add debug information).
    """

    request_id: str
    index: Annotated[int, Meta(ge=0)] | None = None
    action: Action | None = None

    def validate(self) -> None:
        """Raise ``ValueError`` unless exactly one of `index` and `action` is given."""
        check_reply(self)

    def chosen(self, legal: Sequence[Action]) -> Action:
        """The action this reply picks: ``legal[index]`` or `action` (not checked for legality).

        Raises ``ValueError`` for an index outside `legal` or a reply with
        neither/both fields.
        """
        check_reply(self)
        if self.action is not None:
            return self.action
        assert self.index is not None
        if not 0 <= self.index < len(legal):
            raise ValueError(
                f"index {self.index} is out of range: legal has {len(legal)} actions (0..{len(legal) - 1})"
            )
        return legal[self.index]


def check_reply(reply: ActReply) -> None:
    """Raise ``ValueError`` unless `reply` has exactly one of `index` and `action`."""
    if reply.index is None and reply.action is None:
        raise ValueError("reply has neither 'index' nor 'action'; send one")
    if reply.index is not None and reply.action is not None:
        raise ValueError("reply has both 'index' and 'action'; send one")


class Fault(msgspec.Struct, kw_only=True):
    """A fault of this bot, recorded by the referee.

    `kind`: "timeout" (late; `overrun_ms` says by how much), "http_status" (not
    200), "bad_json" (not JSON, or not a valid reply), "too_large" (over the
    size cap), "wrong_request_id", "illegal" (an action not in `legal`, or an
    index out of range), "connection" (could not connect, or the connection
    failed). `turn`: the turn it happened in. `detail`: what exactly.
    """

    kind: str
    turn: int
    detail: str = ""
    overrun_ms: float | None = None


class GameEnd(msgspec.Struct, kw_only=True):
    """Body of `POST /end`. Reveals no hidden card (the same deal may be replayed with seats rotated).

    `places`: final place by seat (1 = winner; equal places are shared, [D11]).
    `adjudicated`: the game hit the turn limit [D12]. `disqualified`: the seats
    disqualified. `faults`: this bot's faults. `points`: penalty points still
    held, by seat (V4 card values, [D14]); empty when not computed.
    `apiversion` is always sent; PROTOCOL.md does not list it here, so it
    defaults to "1" when absent.
    """

    apiversion: str = APIVERSION
    game_id: str
    seat: int
    places: list[int]
    adjudicated: bool
    disqualified: list[int]
    faults: list[Fault]
    points: list[int] = msgspec.field(default_factory=list)
