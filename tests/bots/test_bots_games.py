"""Whole games in process through the strength harness, and the bots' own logic."""

from __future__ import annotations

import json
import random
import time

import pytest

from protocol import (
    APIVERSION,
    ActRequest,
    ChooseUp,
    Draw,
    Pass,
    Play,
    Rules,
    Swap,
    decode_act_request,
    encode,
)
from referee.game import new_game, view
from sample_bots import strategy
from sample_bots.searcher import Searcher, rollout, time_budget_s
from sample_bots.strategy import Tactics, Tracker, finishes
from sample_bots.tactician import Tactician
from tests.support.bots import by_name, full_layout, load_strength

strength = load_strength()

# The searcher thinks ~60% of deadline_ms: a short deadline keeps this fast.
DEADLINE = {"random": 1000, "greedy": 1000, "tactician": 1000, "searcher": 10}


@pytest.mark.parametrize("bot", ["random", "greedy", "tactician", "searcher"])
def test_20_games_against_random_without_an_illegal_action(bot: str) -> None:
    for deal in range(10):
        for seats in ((bot, "random"), ("random", bot)):
            players = [strength.make_bot(name, deal) for name in seats]
            rec = strength.play_game(
                players, seed=500 + deal, deadline_ms=DEADLINE[bot], game_id=f"{bot}-{deal}-{seats[0]}"
            )
            assert rec.illegal == [0, 0], rec
            assert sorted(rec.places) == [1, 2] or rec.adjudicated


def test_variants_are_played_legally() -> None:
    rules = Rules(
        colour_run=True,
        sabotage=True,
        pile_swap=True,
        reverses=True,
        play_for_places=True,
        one_draw_per_clear2=True,
    )
    for deal in range(3):
        players = [strength.make_bot(name, deal) for name in ("tactician", "searcher", "greedy")]
        rec = strength.play_game(players, seed=900 + deal, rules=rules, deadline_ms=10)
        assert rec.illegal == [0, 0, 0], rec


def test_duplicate_deals_swap_seats() -> None:
    res = strength.play_pair("greedy", "random", games=8, deadline_ms=1000)
    assert res.games == 8 and res.illegal == {"greedy": 0, "random": 0}
    first, second = strength.play_deal("greedy", "greedy", 3)
    # The same deterministic bot on both seats of one deal: seat swapping replays the game.
    assert first.places == second.places


def test_wilson_interval() -> None:
    lo, hi = strength.wilson(60, 100)
    assert (round(lo, 4), round(hi, 4)) == (0.5020, 0.6906)
    assert strength.wilson(0, 0) == (0.0, 1.0)


def test_harness_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = strength.main(["--pairs", "greedy:random", "--games", "6", "--json", "--quiet"])
    out = capsys.readouterr().out.strip().splitlines()
    data = json.loads(out[-1])
    pair = data["pairs"][0]
    assert (pair["a"], pair["b"], pair["games"]) == ("greedy", "random", 6)
    assert {"win_rate", "ci_low", "ci_high", "excludes_50", "deadline_ms"} <= set(pair)
    assert code in (0, 1)


# ------------------------------------------------------------ the greedy rules


def test_greedy_choices() -> None:
    legal = by_name("ordinary play").legal  # pile 4Y; hand 3R 5G 5B 9B C
    assert legal[strategy.lowest_play_index(legal)] == Play(cards=["5G"])
    setup = by_name("setup choose_up")
    choice = setup.legal[strategy.lowest_play_index(setup.legal)]
    dealt = sorted(setup.state.hands[0], reverse=True)
    assert isinstance(choice, ChooseUp)
    assert sorted(strategy.rank(c) for c in choice.cards) == sorted(c >> 3 for c in dealt[:3])
    extra = by_name("extra action with draw").legal
    assert not isinstance(extra[strategy.lowest_play_index(extra)], Draw)


# --------------------------------------------------------------- the tactician


def _request(state: object, seat: int = 0, since: int = 0) -> ActRequest:
    from referee.game import GameState

    assert isinstance(state, GameState)
    return ActRequest(
        apiversion=APIVERSION,
        game_id="t",
        request_id="r",
        seat=seat,
        turn=state.turn,
        deadline_ms=1000,
        bank_ms=None,
        state=view(state, seat, since),
        legal=state.legal_actions(seat),
    )


def test_tactician_plays_every_copy_of_its_lowest_rank() -> None:
    req = by_name("ordinary play").request()
    assert req.legal[Tactician().decide(req)] == Play(cards=["5G", "5B"])


def test_tactician_takes_the_free_draw_and_keeps_its_clears() -> None:
    req = by_name("extra action with draw").request()
    assert isinstance(req.legal[Tactician().decide(req)], Draw)
    s = full_layout(
        hands=[["C", "C+1", "2R"], ["3R", "4R", "6R"]],
        up=[[], []],
        down=[["1R", "2G", "3G"], ["4G", "6G", "7G"]],
        pile=["9Y"],
        draw_count=5,
    )
    req = _request(s)
    assert req.legal[Tactician().decide(req)] == Play(cards=["C"])  # the plain Clear first


def test_tactician_goes_out_with_a_clear_plus_2() -> None:
    s = full_layout(
        hands=[[], ["3R", "4R", "6R"]],
        up=[["C", "C+2", "2R"], ["7Y"]],
        down=[[None, None, None], ["4G", "6G", "7G"]],
        pile=["9Y"],
    )
    req = _request(s)
    # C+2, then 2R, then the C empties everything; a plain Clear would end the turn.
    assert req.legal[Tactician().decide(req)] == Play(cards=["C+2"])


def test_tactician_attacks_a_player_whose_cards_are_known() -> None:
    # The opponent plays from its 3UP next (hand and draw pile empty): 3UP 4Y 6Y 7Y.
    s = full_layout(
        hands=[["2R", "8G", "9B"], []],
        up=[["C"], ["4Y", "6Y", "7Y"]],
        down=[["1R", None, None], ["4G", "6G", "7G"]],
        pile=["2B", "3B", "3I", "5B", "5I"],
    )
    req = _request(s)
    assert req.legal[Tactician().decide(req)] == Play(cards=["8G"])  # 8 beats all its 3UP


def test_tracker_learns_what_a_forced_pickup_proves() -> None:
    s = full_layout(
        hands=[["9R", "9G", "2B"], ["2R", "3R", "4B"]],
        up=[[], []],
        down=[["1R", "2G", "3G"], ["4G", "6G", "7G"]],
        pile=["5Y"],
        draw_count=10,
    )
    s.apply(Play(cards=["9R", "9G"]), 0)  # seat 1 holds nothing >= 9: it must pick up
    s.apply(s.legal_actions(1)[0], 1)
    tracker = Tracker(0)
    state = view(s, 0)
    tracker.update(state)
    assert tracker.cap == {1: 9}
    pool = tracker.unseen(state)
    # Seat 1 holds the 3 known cards (5Y 9R 9G) and 3 unknown ones below 9.
    assert tracker.opponent_cannot_beat(state, 1, 9, pool) == 0.0  # the 9s it picked up
    assert tracker.opponent_cannot_beat(state, 1, 10, pool) == 1.0  # nothing beats a 10
    # Without the pick-up, 3 unknown cards may well beat a 10.
    fresh = by_name("ordinary play").request().state
    t2 = Tracker(0)
    t2.update(fresh)
    assert 0.0 < t2.opponent_cannot_beat(fresh, 1, 10, t2.unseen(fresh)) < 1.0
    assert sorted(state.players[1].known) == ["5Y", "9G", "9R"]


def test_finishes() -> None:
    assert finishes(["2R", "2G"], [], 1)
    assert not finishes(["2R", "3G"], [], 1)
    assert finishes(["2R", "3G"], [], 2)
    assert not finishes(["3R", "2G"], ["1B"], 2)
    assert finishes([], ["C+1", "4R"], 1)


def test_tactician_swaps_a_clear_into_its_3up_on_a_colour_run() -> None:
    sc = by_name("V6 swap decision")  # hand 2G 3G, 3UP 9B C 5I: nothing to gain
    req = sc.request()
    assert req.legal[Tactician().decide(req)] == Pass()
    rules = Rules(colour_run=True)
    s = full_layout(
        hands=[["8R", "C+2", "3G"], ["2V", "4V", "5V"]],
        up=[["2B", "9B", "5I"], ["7Y"]],
        down=[["1R", "2G", "3B"], ["4G", "6G", "7G"]],
        pile=["4R", "5R", "7R"],
        draw_count=6,
        rules=rules,
    )
    s.apply(Play(cards=["8R"]), 0)
    req = _request(s)
    assert req.legal[Tactician().decide(req)] == Swap(give="C+2", take="2B")


def test_tactician_sabotage_takes_the_best_card() -> None:
    req = by_name("V5b sabotage").request()
    action = req.legal[Tactician().decide(req)]
    if isinstance(action, Swap):
        assert strategy.rank(action.take) > strategy.rank(action.give)


# ----------------------------------------------------------------- the searcher


def test_time_budget() -> None:
    assert time_budget_s(1000) == pytest.approx(0.54)
    assert time_budget_s(100) == pytest.approx(0.05)
    assert 0 < time_budget_s(10) < 0.01


def test_searcher_searches_within_its_budget() -> None:
    sc = by_name("ordinary play")
    bot = Searcher(seed=4)
    bot.on_start(sc.start("t"))
    req = decode_act_request(encode(sc.request(game_id="t", deadline_ms=200)))
    # the thread's CPU time, not the wall clock's: a loaded machine that stalls the thread
    # between its clock readings makes the wall time longer, never the work it did; a
    # searcher that ignores its budget still spends CPU past it and fails this
    t0 = time.thread_time()
    choice = bot.decide(req)
    assert time.thread_time() - t0 < 0.2 * 0.6
    sc.assert_legal(req.legal[choice])
    worlds, candidates, _ = bot.stats[-1]
    assert candidates == len(req.legal) and worlds >= 10


def test_searcher_finds_the_winning_move() -> None:
    # Seat 0 goes out at once with the pair of 7s from its 3UP; one 7 leaves a card.
    s = full_layout(
        hands=[[], ["3R", "4R", "6R"]],
        up=[["7B", "7I"], ["8Y"]],
        down=[[None, None, None], ["4G", "6G", "7G"]],
        pile=["5Y"],
    )
    sc_rules = Rules()
    bot = Searcher(seed=1)
    req = _request(s)
    from protocol import GameStart, Timeouts

    bot.on_start(
        GameStart(
            apiversion="1", game_id="t", seat=0, players=["me", "you"], rules=sc_rules, timeouts=Timeouts()
        )
    )
    assert req.legal[bot.decide(req)] == Play(cards=["7B", "7I"])


def test_rollout_plays_to_the_end() -> None:
    s = new_game(Rules(), 3, random.Random(1))
    score = rollout(s, 1)
    assert s.over and 0.0 <= score <= 1.0


def test_tactics_default_params_are_sane() -> None:
    t = Tactics()
    assert t.params.multiples and t.params.save_plus


def test_respect_caps_fixes_every_capped_seat_even_after_one_it_cannot() -> None:
    """A forced pick-up proves an opponent holds nothing above the rank it
    picked up on; the searcher's worlds respect that. Seat 1's cap (2) has no
    hidden card below it to swap with, which must not stop seat 2 (cap 9)
    from being fixed; each hidden spot is used once."""
    from referee.game import layout
    from sample_bots.searcher import respect_caps
    from sample_bots.strategy import Game

    world = layout(
        hands=[["5R"], ["9G", "10G"], ["C", "10B"]],
        draw=["3V", "4V", "10V"],
        down=[[None, None, None], [None, None, None], ["6Y", None, None]],
        pile=["5Y"],
    )
    game = Game(rules=Rules(), tracker=Tracker(0), started=True)
    game.tracker.cap = {1: 2, 2: 9}
    cards = sorted(world.all_cards())
    respect_caps(world, game, 0, random.Random(3))
    assert sorted(world.all_cards()) == cards  # swaps only
    assert sorted(c >> 3 for c in world.hands[1]) == [9, 10]  # nothing below 2 to swap in
    assert all(c >> 3 < 9 for c in world.hands[2])  # fixed with 3V, 4V or 6Y


@pytest.mark.parametrize("deal", range(6))
def test_one_tactician_holding_every_seat_of_a_game_plays_as_one_per_seat(deal: int) -> None:
    """League entries that share a bot service put several seats of one game
    on one process (tests/tournament/test_adaptive_run.py: 14 tactician
    entries on one tactician). Its memory was keyed by game_id alone, so the
    seat whose /start came last gave its tracker to every seat, and each
    seat's events were fed into that one tracker: the shared tactician played
    otherwise than a tactician per seat, and differently by the order the
    /start requests arrived in (they go out together). Now it keeps a tracker
    per seat: the same decisions, move for move, whatever that order."""
    from protocol import GameStart, Timeouts

    rules = Rules(play_for_places=True)
    names = ["a", "b", "c", "d"]
    shared, own = Tactician(), [Tactician() for _ in names]
    order = list(range(len(names)))
    random.Random(deal).shuffle(order)
    for seat in order:
        start = GameStart(
            apiversion=APIVERSION, game_id="g", seat=seat, players=names, rules=rules, timeouts=Timeouts()
        )
        shared.on_start(start)
        own[seat].on_start(start)
    state = new_game(rules, names, random.Random(1000 + deal))
    since = [0] * len(names)
    moves = 0
    while not state.over:
        for seat in state.to_move():
            if state.over:
                break
            legal = state.legal_actions(seat)
            req = ActRequest(
                apiversion=APIVERSION,
                game_id="g",
                request_id=str(moves),
                seat=seat,
                turn=state.turn,
                deadline_ms=1000,
                bank_ms=None,
                state=view(state, seat, since[seat]),
                legal=legal,
            )
            since[seat] = len(state.events)
            choice = shared.decide(req)
            assert choice == own[seat].decide(req), f"seat {seat}, turn {state.turn}"
            state.apply(legal[choice], seat)
            moves += 1
    assert moves > 20
    trackers = {s: shared.memory.get("g", s).tracker for s in range(len(names))}
    assert len({id(t) for t in trackers.values()}) == len(names)
    from protocol import GameEnd

    result = state.result()
    for seat in order:  # each seat's /end forgets that seat only; the game goes with the last
        assert "g" in shared.memory.games
        shared.on_end(
            GameEnd(
                game_id="g", seat=seat, places=result.places, adjudicated=False, disqualified=[], faults=[]
            )
        )
        assert seat not in shared.memory.games.get("g", {})
    assert "g" not in shared.memory.games


def test_a_seeded_random_bot_plays_a_deal_alike_at_a_seat_whatever_the_game_id_and_order() -> None:
    """With a seed, the random bot's choices come from the seed, the seat and
    the cards the seat was dealt: not from the referee's game_id (random), nor
    from the order in which the requests of several seats of one game reach
    one service. So a league of the sample bots is the same league at every
    run (tests/tournament/test_adaptive_run.py, benchmarks/entries.py)."""
    from sample_bots.random import RandomBot

    rules = Rules(play_for_places=True)
    names = ["a", "b", "c", "d"]

    def play(bot: RandomBot, game_id: str, reverse: bool) -> list[tuple[int, int]]:
        state = new_game(rules, names, random.Random(42))
        since = [0] * len(names)
        choices: list[tuple[int, int]] = []
        while not state.over:
            seats = state.to_move()
            asked = []
            for seat in seats:
                legal = state.legal_actions(seat)
                asked.append(
                    (
                        seat,
                        legal,
                        ActRequest(
                            apiversion=APIVERSION,
                            game_id=game_id,
                            request_id=str(len(choices)),
                            seat=seat,
                            turn=state.turn,
                            deadline_ms=1000,
                            bank_ms=None,
                            state=view(state, seat, since[seat]),
                            legal=legal,
                        ),
                    )
                )
                since[seat] = len(state.events)
            answers = {seat: bot.decide(req) for seat, _, req in (reversed(asked) if reverse else asked)}
            for seat, legal, _ in asked:
                if not state.over:
                    choices.append((seat, answers[seat]))
                    state.apply(legal[answers[seat]], seat)
        return choices

    first = play(RandomBot(seed=5), "one", False)
    assert play(RandomBot(seed=5), "another", True) == first
    assert play(RandomBot(seed=6), "one", False) != first
