"""Golden playthroughs: seeded games with every seat's view at every step.

Each line of ``tests/golden/playthrough_<name>.jsonl`` is one step: the acting
seat, its legal actions, the action taken, and every seat's view with the
events since that seat's previous view (what a bot receives). A change of the
engine's behaviour shows up as a diff; after a deliberate change, regenerate
with ``python -m pytest tests/game/test_golden.py --update-golden`` and review
the diff.
"""

from __future__ import annotations

import difflib
import random
from pathlib import Path

import msgspec
import pytest

from protocol import Deck, Rules
from referee.game import full_view, new_game, view

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

GAMES: dict[str, tuple[int, int, Rules]] = {
    "2p_standard": (1, 2, Rules(turn_limit=40)),
    "4p_places_reverses_colour_run": (
        2,
        4,
        Rules(deck=Deck(colours="ROYG"), play_for_places=True, reverses=True, colour_run=True, turn_limit=40),
    ),
    "3p_italian_swaps_draws": (
        3,
        3,
        Rules(
            deck="italian",
            pile_swap=True,
            sabotage=True,
            draw_instead_of_playing=True,
            one_draw_per_clear2=True,
            turn_limit=40,
        ),
    ),
}

ENCODER = msgspec.json.Encoder(order="deterministic")


def playthrough(seed: int, players: int, rules: Rules) -> str:
    rng = random.Random(seed)
    state = new_game(rules, [f"bot{i}" for i in range(players)], rng)
    seen = [0] * players
    lines = []
    step = 0
    while not state.over:
        seat = state.to_move()[0]
        legal = state.legal_actions(seat)
        action = rng.choice(legal)
        views = []
        for s in range(players):
            views.append(view(state, s, seen[s]))
            seen[s] = len(state.events)
        lines.append({"step": step, "seat": seat, "legal": legal, "action": action, "views": views})
        state.apply(action, seat)
        step += 1
    result = state.result()
    lines.append(
        {
            "result": {
                "places": result.places,
                "adjudicated": result.adjudicated,
                "points": result.points,
                "turns": result.turns,
            },
            "final": full_view(state),
        }
    )
    return "".join(ENCODER.encode(line).decode() + "\n" for line in lines)


@pytest.mark.parametrize("name", sorted(GAMES))
def test_golden_playthrough(name: str, update_golden: bool) -> None:
    seed, players, rules = GAMES[name]
    text = playthrough(seed, players, rules)
    path = GOLDEN / f"playthrough_{name}.jsonl"
    if update_golden or not path.exists():
        if not update_golden:
            pytest.fail(f"{path} is missing: run with --update-golden to write it")
        path.write_text(text)
        return
    expected = path.read_text()
    if text != expected:
        diff = "".join(
            difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "golden", "now", n=0)
        )
        pytest.fail(
            f"{name} differs from {path.name} (first lines of the diff):\n{diff[:3000]}"
            "\nIf the change is intended, rerun with --update-golden and review the diff."
        )
