"""Peer throughput measurements for the engine benchmark.

Two reference points from other card-game engines, each driven the same
way: an in-process Python loop that plays uniformly random legal actions
with a fixed seed, for a given number of (non-chance) steps.

* ``openspiel_crazy_eights`` -- OpenSpiel's C++ ``crazy_eights`` via pyspiel.
  Supports 2..15 players.  Game parameters other than ``players`` are left at
  OpenSpiel's defaults (``max_turns=100``, ``max_draw_cards=5``,
  ``reshuffle=False``, ``use_special_cards=False``), so some games end by the
  turn cap rather than by a player going out.  Dealing and drawing are chance
  nodes; they are sampled and applied inside the timed loop but counted
  separately (``chance_steps``), not as steps.
* ``rlcard_uno`` -- RLCard's pure-Python ``uno`` through its documented env
  API (``env.reset()`` / ``env.step()`` / ``env.is_over()``), which is how
  RLCard's own ``RandomAgent`` is driven (``Env.run``); every step therefore
  includes RLCard's observation encoding.  RLCard's uno is 2-player only:
  ``Env.__init__`` applies ``game_*`` config keys only for blackjack and the
  hold'em games, so ``game_num_players`` is silently ignored for uno, and its
  judger / payoffs hard-code players 0 and 1.  Asking for another player count
  measures 2 players and says so in the result (``requested_players``,
  ``note``).

The peers are optional (``pip install -e .[bench]``); this module imports
without them and each function raises ``RuntimeError`` if its peer is
missing.

Run ``python benchmarks/peers.py`` for a table.
"""

from __future__ import annotations

import logging
import os
import random
import time
import warnings
from typing import Any

__all__ = ["openspiel_crazy_eights", "rlcard_uno"]

INSTALL_HINT = "install the bench extra: pip install -e .[bench]"
WARMUP_STEPS = 500


def _quiet() -> None:
    """Silence library warnings and log lines (absl, TF-style env vars)."""
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in ("absl", "rlcard", "open_spiel"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.ERROR)
    except ImportError:
        pass


def _result(
    peer: str,
    players: int,
    steps: int,
    games: int,
    steps_in_games: int,
    seconds: float,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "peer": peer,
        "players": players,
        "steps": steps,
        "games": games,
        "seconds": seconds,
        "steps_per_s": steps / seconds if seconds > 0 else float("inf"),
        "games_per_s": games / seconds if seconds > 0 else float("inf"),
        # Over completed games only (the game in progress at the stop is excluded).
        "mean_steps_per_game": steps_in_games / games if games else float("nan"),
        **extra,
    }


# --------------------------------------------------------------------------
# OpenSpiel crazy_eights
# --------------------------------------------------------------------------


def _crazy_eights_run(game: Any, steps: int, rng: random.Random) -> tuple[int, int, int]:
    """Play ``steps`` random non-chance actions; return (games, steps_in_games, chance_steps)."""
    state = game.new_initial_state()
    choice = rng.choice
    choices = rng.choices
    done = 0
    games = 0
    steps_in_games = 0
    game_start = 0
    chance_steps = 0
    while done < steps:
        if state.is_terminal():
            games += 1
            steps_in_games += done - game_start
            game_start = done
            state = game.new_initial_state()
        elif state.is_chance_node():
            outcomes = state.chance_outcomes()
            actions = [a for a, _ in outcomes]
            probs = [p for _, p in outcomes]
            state.apply_action(choices(actions, probs)[0])
            chance_steps += 1
        else:
            state.apply_action(choice(state.legal_actions()))
            done += 1
    # A game that ends exactly on the last step is complete too.
    if state.is_terminal():
        games += 1
        steps_in_games += done - game_start
    return games, steps_in_games, chance_steps


def openspiel_crazy_eights(players: int, steps: int, seed: int) -> dict[str, Any]:
    """Random play of OpenSpiel ``crazy_eights`` (2..15 players) for ``steps`` actions."""
    _quiet()
    try:
        import pyspiel
    except ImportError as exc:
        raise RuntimeError(INSTALL_HINT) from exc

    game = pyspiel.load_game("crazy_eights", {"players": players})
    # Warm-up on a separate RNG; the timed run starts from a fresh game and seed.
    _crazy_eights_run(game, WARMUP_STEPS, random.Random(seed ^ 0x5EED))

    rng = random.Random(seed)
    t0 = time.perf_counter()
    games, steps_in_games, chance_steps = _crazy_eights_run(game, steps, rng)
    seconds = time.perf_counter() - t0
    return _result(
        "open_spiel crazy_eights",
        players,
        steps,
        games,
        steps_in_games,
        seconds,
        chance_steps=chance_steps,
    )


# --------------------------------------------------------------------------
# RLCard uno
# --------------------------------------------------------------------------

UNO_PLAYERS = (2,)


def _uno_run(env: Any, steps: int, rng: random.Random) -> tuple[int, int]:
    """Play ``steps`` random env.step calls; return (games, steps_in_games)."""
    choice = rng.choice
    state, _ = env.reset()
    done = 0
    games = 0
    steps_in_games = 0
    game_start = 0
    while done < steps:
        if env.is_over():
            games += 1
            steps_in_games += done - game_start
            game_start = done
            state, _ = env.reset()
            continue
        state, _ = env.step(choice(list(state["legal_actions"])))
        done += 1
    if env.is_over():
        games += 1
        steps_in_games += done - game_start
    return games, steps_in_games


def rlcard_uno(players: int, steps: int, seed: int) -> dict[str, Any]:
    """Random play of RLCard ``uno`` through its env API for ``steps`` env.step calls.

    RLCard's uno only supports 2 players; any other ``players`` is measured at
    2 and flagged in the result (``requested_players`` and ``note``).
    """
    _quiet()
    try:
        import rlcard
    except ImportError as exc:
        raise RuntimeError(INSTALL_HINT) from exc

    env = rlcard.make("uno", config={"seed": seed, "game_num_players": players})
    actual = env.num_players
    extra: dict[str, Any] = {}
    if actual != players:
        extra = {
            "requested_players": players,
            "note": f"rlcard uno supports {actual} players only; measured {actual}",
        }

    _uno_run(env, WARMUP_STEPS, random.Random(seed ^ 0x5EED))
    env.seed(seed)  # reseed the deck shuffles so the timed run is reproducible
    rng = random.Random(seed)
    t0 = time.perf_counter()
    games, steps_in_games = _uno_run(env, steps, rng)
    seconds = time.perf_counter() - t0
    return _result("rlcard uno", actual, steps, games, steps_in_games, seconds, **extra)


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def _main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--ce-steps", type=int, default=200_000)
    ap.add_argument("--uno-steps", type=int, default=50_000)
    args = ap.parse_args()

    runs: list[dict[str, Any]] = []
    for n in (2, 4, 6):
        runs.append(openspiel_crazy_eights(n, args.ce_steps, args.seed))
    for n in (2, 4):
        runs.append(rlcard_uno(n, args.uno_steps, args.seed))

    hdr = (
        f"{'peer':<24} {'players':>7} {'steps':>8} {'games':>6} {'seconds':>8} "
        f"{'steps/s':>10} {'games/s':>9} {'steps/game':>10}  note"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in runs:
        print(
            f"{r['peer']:<24} {r['players']:>7} {r['steps']:>8} {r['games']:>6} "
            f"{r['seconds']:>8.3f} {r['steps_per_s']:>10.0f} {r['games_per_s']:>9.1f} "
            f"{r['mean_steps_per_game']:>10.1f}  {r.get('note', '')}"
        )
    print()
    print("crazy_eights: 2..15 players supported (OpenSpiel defaults: max_turns=100).")
    print("uno: rlcard supports 2 players only (game_num_players is ignored).")


if __name__ == "__main__":
    _main()
