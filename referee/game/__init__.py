"""The pure 3UP 3DOWN rules engine (RULES.md): no I/O, no clock, randomness
passed in. Bots may import it as a library to simulate games from their seat::

    import random
    from protocol import Rules
    from referee.game import new_game, view, resample

    state = new_game(Rules(), ["alice", "bob"], random.Random(7))
    while not state.over:
        for seat in state.to_move():
            state.apply(state.legal_actions(seat)[0], seat)
    print(state.result())
"""

from .layout import layout
from .resample import from_view, resample
from .state import (
    ActionError,
    GameResult,
    GameState,
    IllegalActionError,
    MalformedActionError,
    new_game,
)
from .view import ViewCache, events, full_view, public_view, view

__all__ = [
    "ActionError",
    "GameResult",
    "GameState",
    "IllegalActionError",
    "MalformedActionError",
    "ViewCache",
    "events",
    "from_view",
    "full_view",
    "layout",
    "new_game",
    "public_view",
    "resample",
    "view",
]
