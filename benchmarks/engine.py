"""Engine throughput against two peers, measured in the same run.

A step: list the current seat's legal actions, pick one uniformly at random,
apply it (set-up choices included). Games are played to the end and new ones
dealt as needed. The peers are driven the same way from a Python loop:
OpenSpiel's ``crazy_eights`` (C++ behind pyspiel) and RLCard's ``uno`` (pure
Python; 2 players only). Each measurement is repeated and interleaved with the
others; the median is reported, with ratios against the peers.

    python benchmarks/engine.py [--steps N] [--repeats K] [--json]

Targets (issue 16): steps/s at least 1.3x OpenSpiel's and at least 5x RLCard's.
The first line says which engine ran (compiled, or the source: ``REFEREE_PURE=1``;
``benchmarks/builds.py engine`` runs both).
The peers need ``pip install -e .[bench]``; without them only the engine's
figures are printed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import openspiel_crazy_eights, rlcard_uno

from protocol import Rules
from referee import engine_status
from referee.game import new_game

PLAYERS = (2, 4, 6)
TARGET_OPENSPIEL = 1.3
TARGET_RLCARD = 5.0


def engine(players: int, steps: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    rules = Rules()
    # Warm up (interned actions, caches) untimed.
    warm = new_game(rules, players, random.Random(seed + 1))
    while not warm.over:
        seat = warm.to_move()[0]
        warm.apply(rng.choice(warm.legal_actions(seat)), seat)
    done = 0
    games = 0
    choice = rng.choice
    t0 = time.perf_counter()
    while done < steps:
        state = new_game(rules, players, rng)
        while not state.over:
            seat = state.to_move()[0]
            state.apply(choice(state.legal_actions(seat)), seat)
            done += 1
        games += 1
    seconds = time.perf_counter() - t0
    return {
        "peer": "referee engine",
        "players": players,
        "steps": done,
        "games": games,
        "seconds": seconds,
        "steps_per_s": done / seconds,
        "games_per_s": games / seconds,
        "mean_steps_per_game": done / games,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=100_000, help="steps per measurement")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repetitions (median taken)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = ap.parse_args()
    print(engine_status())

    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    peers_ok = {"openspiel": True, "rlcard": True}
    for rep in range(args.repeats):
        for n in PLAYERS:
            runs.setdefault(("engine", n), []).append(engine(n, args.steps, args.seed + rep))
            if peers_ok["openspiel"]:
                try:
                    runs.setdefault(("openspiel", n), []).append(
                        openspiel_crazy_eights(n, args.steps, args.seed + rep)
                    )
                except RuntimeError as e:
                    peers_ok["openspiel"] = False
                    print(f"openspiel: {e}", file=sys.stderr)
            if n == 2 and peers_ok["rlcard"]:
                try:
                    runs.setdefault(("rlcard", n), []).append(
                        rlcard_uno(n, max(args.steps // 4, 10_000), args.seed + rep)
                    )
                except RuntimeError as e:
                    peers_ok["rlcard"] = False
                    print(f"rlcard: {e}", file=sys.stderr)

    def med(key: tuple[str, int], field: str) -> float | None:
        rs = runs.get(key)
        return statistics.median(r[field] for r in rs) if rs else None

    rlcard_sps = med(("rlcard", 2), "steps_per_s")
    report: dict[str, Any] = {"steps_per_measurement": args.steps, "repeats": args.repeats, "players": {}}
    print(
        f"{'players':>7} {'engine steps/s':>15} {'games/s':>9} {'steps/game':>10} "
        f"{'crazy8 steps/s':>15} {'x crazy8':>9} {'x uno(2p)':>10}"
    )
    for n in PLAYERS:
        sps = med(("engine", n), "steps_per_s")
        gps = med(("engine", n), "games_per_s")
        spg = med(("engine", n), "mean_steps_per_game")
        ce = med(("openspiel", n), "steps_per_s")
        assert sps is not None and gps is not None and spg is not None
        row: dict[str, Any] = {
            "engine_steps_per_s": round(sps),
            "engine_games_per_s": round(gps, 1),
            "engine_steps_per_game": round(spg, 1),
            "openspiel_crazy_eights_steps_per_s": round(ce) if ce else None,
            "openspiel_crazy_eights_games_per_s": round(med(("openspiel", n), "games_per_s") or 0, 1) or None,
            "ratio_vs_openspiel": round(sps / ce, 2) if ce else None,
            "ratio_vs_rlcard_uno": round(sps / rlcard_sps, 2) if rlcard_sps else None,
        }
        report["players"][str(n)] = row
        print(
            f"{n:>7} {sps:>15,.0f} {gps:>9,.0f} {spg:>10.1f} "
            f"{(ce or 0):>15,.0f} {row['ratio_vs_openspiel'] or '-':>9} {row['ratio_vs_rlcard_uno'] or '-':>10}"
        )
    if rlcard_sps:
        report["rlcard_uno_2p_steps_per_s"] = round(rlcard_sps)
        report["rlcard_uno_2p_games_per_s"] = round(med(("rlcard", 2), "games_per_s") or 0, 1)
        print(f"RLCard uno (2 players only): {rlcard_sps:,.0f} steps/s")
    ok_os = all((r["ratio_vs_openspiel"] or 0) >= TARGET_OPENSPIEL for r in report["players"].values())
    ok_rl = all((r["ratio_vs_rlcard_uno"] or 0) >= TARGET_RLCARD for r in report["players"].values())
    report["target_openspiel_met"] = ok_os if peers_ok["openspiel"] else None
    report["target_rlcard_5x_met"] = ok_rl if peers_ok["rlcard"] else None
    report["engine"] = engine_status()
    print(
        f"targets: >= {TARGET_OPENSPIEL}x OpenSpiel: {report['target_openspiel_met']}; "
        f">= {TARGET_RLCARD:g}x RLCard: {report['target_rlcard_5x_met']}"
    )
    if args.json:
        print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
