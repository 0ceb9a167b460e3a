"""Scripted positions and request builders for the bot tests.

Each :class:`Scripted` is a real engine state at a decision of seat 0, laid
out with the whole standard deck (the cards not placed are cleared, or in the
draw pile), so a search bot's ``from_view`` can rebuild worlds from its view.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType

from protocol import (
    APIVERSION,
    Action,
    ActRequest,
    ChooseUp,
    Deck,
    GameEnd,
    GameStart,
    Play,
    Rules,
    Timeouts,
    encode,
)
from referee.game import GameState, layout, new_game, view
from tests.support import ROOT

STANDARD = Deck().cards()


def full_layout(
    hands: Sequence[Sequence[str]],
    up: Sequence[Sequence[str]],
    down: Sequence[Sequence[str | None]],
    pile: Sequence[str] = (),
    draw_count: int = 0,
    rules: Rules | None = None,
) -> GameState:
    """``layout`` with every other card of the standard deck in the draw pile
    (the first ``draw_count`` of them) or cleared (the rest)."""
    used = Counter(
        [c for h in hands for c in h]
        + [c for u in up for c in u]
        + [c for d in down for c in d if c is not None]
        + list(pile)
    )
    rest = list((Counter(STANDARD) - used).elements())
    assert not used - Counter(STANDARD), "a card is used more often than the deck holds"
    random.Random(5).shuffle(rest)
    return layout(
        hands=hands,
        up=up,
        down=down,
        pile=pile,
        draw=rest[:draw_count],
        cleared=rest[draw_count:],
        rules=rules,
        names=["me", "you"],
    )


@dataclass
class Scripted:
    """A decision of ``seat`` in ``state``."""

    name: str
    state: GameState
    rules: Rules = field(default_factory=Rules)
    seat: int = 0

    @property
    def legal(self) -> list[Action]:
        return list(self.state.legal_actions(self.seat))

    def request(self, request_id: str = "r1", game_id: str = "g1", deadline_ms: int = 1000) -> ActRequest:
        return ActRequest(
            apiversion=APIVERSION,
            game_id=game_id,
            request_id=request_id,
            seat=self.seat,
            turn=self.state.turn,
            deadline_ms=deadline_ms,
            bank_ms=None,
            state=view(self.state, self.seat),
            legal=self.legal,
        )

    def start(self, game_id: str = "g1") -> GameStart:
        return GameStart(
            apiversion=APIVERSION,
            game_id=game_id,
            seat=self.seat,
            players=list(self.state.names),
            rules=self.rules,
            timeouts=Timeouts(),
        )

    def assert_legal(self, action: Action) -> None:
        """The engine accepts ``action`` here (raises otherwise)."""
        self.state.copy().apply(action, self.seat)


def game_end(game_id: str = "g1", seat: int = 0) -> GameEnd:
    return GameEnd(game_id=game_id, seat=seat, places=[1, 2], adjudicated=False, disqualified=[], faults=[])


def _setup() -> Scripted:
    return Scripted("setup choose_up", new_game(Rules(), ["me", "you"], random.Random(3)))


def _play() -> Scripted:
    s = full_layout(
        hands=[["3R", "5G", "5B", "9B", "C"], ["2R", "4R", "6R"]],
        up=[["8G", "10V", "C+1"], ["7Y", "9Y", "10Y"]],
        down=[["1R", "2G", "3G"], ["4G", "6G", "7G"]],
        pile=["4Y"],
        draw_count=10,
    )
    return Scripted("ordinary play", s)


def _pickup() -> Scripted:
    s = full_layout(
        hands=[["2R", "3B"], ["5R", "6R", "8R"]],
        up=[["9G", "10G", "C"], ["7Y", "9Y", "10Y"]],
        down=[["1R", "2G", "3G"], ["4G", "6G", "7G"]],
        pile=["5Y", "7B"],
        draw_count=5,
    )
    return Scripted("must pick up", s)


def _flip() -> Scripted:
    s = full_layout(
        hands=[[], ["5R", "6R"]],
        up=[[], ["9G"]],
        down=[["1R", None, "3G"], ["4G", "6G", "7G"]],
        pile=["6B"],
    )
    return Scripted("3DOWN flip", s)


def _extra_draw() -> Scripted:
    s = full_layout(
        hands=[["C+1", "3R", "8G"], ["2R", "4R", "6R"]],
        up=[["8B", "10V", "C"], ["7Y", "9Y", "10Y"]],
        down=[["1R", "2G", "3G"], ["4G", "6G", "7G"]],
        pile=["9I"],
        draw_count=12,
    )
    s.apply(Play(cards=["C+1"]), 0)
    return Scripted("extra action with draw", s)


def _colour_run() -> Scripted:
    rules = Rules(colour_run=True)
    s = full_layout(
        hands=[["8R", "2G", "3G"], ["2V", "4V", "5V"]],
        up=[["9B", "C", "5I"], ["7Y", "9Y", "10Y"]],
        down=[["1R", "2B", "3B"], ["4G", "6G", "7G"]],
        pile=["4R", "5R", "7R"],
        draw_count=6,
        rules=rules,
    )
    s.apply(Play(cards=["8R"]), 0)
    assert s.pending_swap
    return Scripted("V6 swap decision", s, rules)


def _sabotage() -> Scripted:
    rules = Rules(sabotage=True)
    s = new_game(rules, ["me", "you"], random.Random(8))
    for seat in (0, 1):
        s.apply(s.legal_actions(seat)[0], seat)
    assert s.phase == 1 and s.current == 0
    return Scripted("V5b sabotage", s, rules)


def scripted() -> list[Scripted]:
    """Every scripted decision the bots are tested on."""
    return [_setup(), _play(), _pickup(), _flip(), _extra_draw(), _colour_run(), _sabotage()]


SCRIPTED_NAMES = [s.name for s in scripted()]


def by_name(name: str) -> Scripted:
    return next(s for s in scripted() if s.name == name)


def body(message: object) -> bytes:
    return encode(message)


def load_strength() -> ModuleType:
    """benchmarks/strength.py as a module (benchmarks/ is not a package)."""
    name = "strength_harness"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "strength.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def is_choose_up(action: Action) -> bool:
    return isinstance(action, ChooseUp)
