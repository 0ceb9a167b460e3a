"""Shared helpers for the engine tests."""

from __future__ import annotations

import random

from protocol import Action, Rules
from referee.game import GameState, new_game


def play_random(state: GameState, rng: random.Random, max_steps: int = 1_000_000) -> int:
    """Play uniformly random legal actions to the end; returns the steps taken."""
    steps = 0
    while not state.over and steps < max_steps:
        seat = state.to_move()[0]
        state.apply(rng.choice(state.legal_actions(seat)), seat)
        steps += 1
    return steps


def random_game(n: int, seed: int, rules: Rules | None = None) -> GameState:
    return new_game(rules or Rules(), n, random.Random(seed))


def kinds(actions: list[Action]) -> list[str]:
    """Actions as short strings: 'play 5R 5G', 'pickup', 'flip 1', ..."""
    out = []
    for a in actions:
        tag = type(a).__struct_config__.tag
        if hasattr(a, "cards"):
            out.append(" ".join([str(tag), *a.cards]))
        elif hasattr(a, "slot"):
            out.append(f"{tag} {a.slot}")
        elif hasattr(a, "give"):
            out.append(f"{tag} {a.give}>{a.take}" + ("" if a.target is None else f"@{a.target}"))
        else:
            out.append(str(tag))
    return out
