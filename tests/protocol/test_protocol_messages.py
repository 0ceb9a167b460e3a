"""protocol.messages: the PROTOCOL.md examples decode, every message round-trips and
matches the committed JSON Schema."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
import msgspec
import pytest

from protocol import (
    APIVERSION,
    DECK_PRESETS,
    Action,
    ActReply,
    ActRequest,
    BotInfo,
    ChooseUp,
    Deck,
    Draw,
    Event,
    Fault,
    Flip,
    GameEnd,
    GameStart,
    Pass,
    Pickup,
    Play,
    PlayerView,
    ProtocolError,
    Rules,
    State,
    Swap,
    Timeouts,
    YouView,
    decode_act_request,
    decode_action,
    decode_bot_info,
    decode_game_end,
    decode_game_start,
    decode_reply,
    decode_state,
    encode,
)
from protocol.schema import SCHEMA_DIR

# --------------------------------------------------------------------------
# PROTOCOL.md examples, verbatim (the state example with its "..." filled in).
# --------------------------------------------------------------------------

ACTION_LINES = """\
{"type": "choose_up", "cards": ["7G", "C+1", "9R"]}
{"type": "play", "cards": ["5R", "5B"]}
{"type": "flip", "slot": 1}
{"type": "pickup"}
{"type": "draw"}
{"type": "swap", "give": "3R", "take": "9B"}
{"type": "pass"}
"""

ACTIONS: list[Action] = [
    ChooseUp(("7G", "C+1", "9R")),
    Play(("5R", "5B")),
    Flip(1),
    Pickup(),
    Draw(),
    Swap("3R", "9B"),
    Pass(),
]

STATE_EXAMPLE = """\
{
  "you":     {"seat": 0, "hand": ["3R", "9B"], "up": ["7G"], "down": [0, 2]},
  "players": [{"seat": 0, "name": "greedy", "hand_count": 2, "up": ["7G"],
               "down_count": 2, "out": false, "place": null},
              {"seat": 1, "name": "random", "hand_count": 5, "up": [],
               "down_count": 1, "out": false, "place": null}],
  "pile": ["3R", "3G"],
  "draw_count": 40,
  "cleared": ["C", "5R", "5B", "5G"],
  "removed_count": 0,
  "current": 0,
  "direction": 1,
  "extra_actions": 0,
  "events": [{"seq": 41, "seat": 1, "type": "play", "cards": ["3G"]},
             {"seq": 42, "seat": 1, "type": "draw", "count": 1}]
}
"""


def test_action_lines_decode() -> None:
    lines = ACTION_LINES.splitlines()
    assert len(lines) == len(ACTIONS)
    for line, expected in zip(lines, ACTIONS):
        action = decode_action(line.encode())
        assert action == expected
        assert msgspec.json.decode(line, type=Action) == expected
        # Encoding gives the example back (Swap adds its extension "target": null).
        back = json.loads(encode(action))
        if isinstance(action, Swap):
            assert back.pop("target") is None
        assert back == json.loads(line)


def test_state_example_decodes() -> None:
    state = decode_state(STATE_EXAMPLE.encode())
    assert state.you == YouView(seat=0, hand=["3R", "9B"], up=["7G"], down=[0, 2])
    assert state.players[0] == PlayerView(
        seat=0, name="greedy", hand_count=2, up=["7G"], down_count=2, out=False, place=None
    )
    # extensions take their defaults
    assert state.players[0].down == [] and state.players[0].known == []
    assert state.players[0].disqualified is False
    assert (state.phase, state.turn, state.pending) == ("play", 0, None)
    assert state.pile == ["3R", "3G"]
    assert state.draw_count == 40
    assert state.cleared == ["C", "5R", "5B", "5G"]
    assert state.events[0] == Event(seq=41, seat=1, type="play", cards=["3G"])
    assert state.events[1].count == 1 and state.events[1].cards is None


def test_get_root_reply_example() -> None:
    info = decode_bot_info(b'{"apiversion": "1", "name": "greedy", "author": "ann", "version": "2.1"}')
    assert info == BotInfo(apiversion="1", name="greedy", author="ann", version="2.1")
    assert decode_bot_info(b'{"apiversion": "1", "name": "x"}') == BotInfo(apiversion="1", name="x")


def test_act_reply_examples() -> None:
    assert decode_reply(b'{"request_id": "r1", "index": 0}') == ActReply(request_id="r1", index=0)
    assert decode_reply(b'{"request_id": "r1", "action": {"type": "flip", "slot": 2}}') == ActReply(
        request_id="r1", action=Flip(2)
    )


GAME_START_MINIMAL = b"""{
  "apiversion": "1", "game_id": "9f2c", "seat": 1, "players": ["greedy", "random"],
  "rules": {"deck": "standard", "play_for_places": true, "turn_limit": 1000},
  "timeouts": {"move_ms": 1000, "bank_ms": 10000, "start_ms": 5000, "end_ms": 2000}
}"""

ACT_REQUEST_MINIMAL = (
    b"""{
  "apiversion": "1", "game_id": "9f2c", "request_id": "9f2c-17", "seat": 0, "turn": 17,
  "deadline_ms": 1000, "bank_ms": null,
  "state": """
    + STATE_EXAMPLE.encode()
    + b""",
  "legal": [{"type": "play", "cards": ["3R"]}, {"type": "play", "cards": ["9B"]}]
}"""
)

GAME_END_MINIMAL = b"""{
  "apiversion": "1", "game_id": "9f2c", "seat": 0, "places": [1, 2, 2],
  "adjudicated": false, "disqualified": [],
  "faults": [{"kind": "timeout", "turn": 12, "overrun_ms": 35.5}]
}"""


def test_minimal_messages_decode() -> None:
    start = decode_game_start(GAME_START_MINIMAL)
    assert start.rules.play_for_places and start.rules.resolved_deck().size() == 84
    assert start.timeouts.bank_ms == 10000

    request = decode_act_request(ACT_REQUEST_MINIMAL)
    assert request.legal == [Play(("3R",)), Play(("9B",))]
    assert request.bank_ms is None and request.turn == 17

    end = decode_game_end(GAME_END_MINIMAL)
    assert end.faults == [Fault(kind="timeout", turn=12, overrun_ms=35.5)]
    assert end.faults[0].detail == ""
    assert end.points == []


# Field names PROTOCOL.md fixes (the core; never renamed or removed).
PROTOCOL_FIELDS: dict[type[msgspec.Struct], set[str]] = {
    BotInfo: {"apiversion", "name", "author", "version"},
    GameStart: {"apiversion", "game_id", "seat", "players", "rules", "timeouts"},
    ActRequest: {
        "apiversion",
        "game_id",
        "request_id",
        "seat",
        "turn",
        "deadline_ms",
        "bank_ms",
        "state",
        "legal",
    },
    ActReply: {"request_id", "index", "action"},
    State: {
        "you",
        "players",
        "pile",
        "draw_count",
        "cleared",
        "removed_count",
        "current",
        "direction",
        "extra_actions",
        "events",
    },
    YouView: {"seat", "hand", "up", "down"},
    PlayerView: {"seat", "name", "hand_count", "up", "down_count", "out", "place"},
    Event: {"seq", "seat", "type", "cards", "count"},
    GameEnd: {"game_id", "seat", "places", "adjudicated", "disqualified", "faults"},
    ChooseUp: {"cards"},
    Play: {"cards"},
    Flip: {"slot"},
    Swap: {"give", "take"},
}


@pytest.mark.parametrize("cls", list(PROTOCOL_FIELDS), ids=lambda c: c.__name__)
def test_protocol_field_names(cls: type[msgspec.Struct]) -> None:
    fields = {f.name: f for f in msgspec.structs.fields(cls)}
    assert PROTOCOL_FIELDS[cls] <= set(fields)
    for name, field in fields.items():
        if name not in PROTOCOL_FIELDS[cls]:
            # Extensions must have defaults so that old messages decode.
            assert field.required is False, f"{cls.__name__}.{name} is an extension without default"
        assert field.encode_name == name


def test_action_tags() -> None:
    tags = {type(a).__name__: a.__struct_config__.tag for a in ACTIONS}
    assert tags == {
        "ChooseUp": "choose_up",
        "Play": "play",
        "Flip": "flip",
        "Pickup": "pickup",
        "Draw": "draw",
        "Swap": "swap",
        "Pass": "pass",
    }
    assert all(a.__struct_config__.tag_field == "type" for a in ACTIONS)


def test_actions_are_hashable_and_frozen() -> None:
    assert len(set(ACTIONS)) == len(ACTIONS)
    assert len({Play(("5R",)), Play(("5R",)), Pickup(), Pickup()}) == 2
    # a list given to the constructor becomes a tuple, so equality and hashing work
    listed = Play(["5R", "5B"])
    assert listed.cards == ("5R", "5B")
    assert listed == Play(("5R", "5B")) and hash(listed) == hash(Play(("5R", "5B")))
    assert ChooseUp(cards=["7G"]).cards == ("7G",)
    # decoded actions are hashable too
    assert hash(decode_action(b'{"type": "play", "cards": ["5R"]}')) == hash(Play(["5R"]))
    with pytest.raises(TypeError, match="not the string '5R'"):
        Play("5R")
    with pytest.raises(AttributeError):
        Flip(1).slot = 2  # type: ignore[misc]
    assert Swap("3R", "9B", target=2) != Swap("3R", "9B")


def test_event_omits_defaults() -> None:
    assert json.loads(encode(Event(seq=3, seat=1, type="pickup", count=4))) == {
        "seq": 3,
        "seat": 1,
        "type": "pickup",
        "count": 4,
    }
    assert json.loads(encode(Event(seq=9, seat=0, type="end"))) == {
        "seq": 9,
        "seat": 0,
        "type": "end",
    }


def test_act_reply_chosen() -> None:
    legal: list[Action] = [Play(("3R",)), Pickup()]
    assert ActReply(request_id="r", index=1).chosen(legal) == Pickup()
    assert ActReply(request_id="r", action=Play(("3G",))).chosen(legal) == Play(("3G",))
    with pytest.raises(ValueError, match="index 2 is out of range: legal has 2 actions"):
        ActReply(request_id="r", index=2).chosen(legal)
    with pytest.raises(ValueError, match="neither"):
        ActReply(request_id="r").validate()
    with pytest.raises(ValueError, match="both"):
        ActReply(request_id="r", index=0, action=Pickup()).validate()


def test_legal_never_empty() -> None:
    data = json.loads(ACT_REQUEST_MINIMAL)
    data["legal"] = []
    with pytest.raises(Exception, match="length >= 1"):
        decode_act_request(json.dumps(data).encode())


def test_apiversion() -> None:
    assert APIVERSION == "1"


# --------------------------------------------------------------------------
# Round trips, validated against the committed JSON Schema.
# --------------------------------------------------------------------------


def _state() -> State:
    return State(
        you=YouView(seat=1, hand=["3R", "9B", "C+1"], up=["7G", "10V"], down=[0, 2]),
        players=[
            PlayerView(
                seat=0,
                name="greedy",
                hand_count=0,
                up=[],
                down_count=0,
                out=True,
                place=1,
                down=[],
                known=[],
            ),
            PlayerView(
                seat=1,
                name="me",
                hand_count=3,
                up=["7G", "10V"],
                down_count=2,
                out=False,
                place=None,
                down=[0, 2],
                known=["9B"],
            ),
            PlayerView(
                seat=2,
                name="crash",
                hand_count=0,
                up=[],
                down_count=0,
                out=True,
                place=3,
                disqualified=True,
            ),
        ],
        pile=["3R", "3G"],
        draw_count=12,
        cleared=["C", "5R", "5B", "5G"],
        removed_count=6,
        current=1,
        direction=-1,
        extra_actions=1,
        events=[
            Event(seq=1, seat=0, type="choose_up", cards=["7G", "C+1", "9R"]),
            Event(seq=2, seat=0, type="pile_swap", target=2),
            Event(seq=3, seat=1, type="swap", cards=["3R", "9B"], target=0),
            Event(seq=4, seat=2, type="pass"),
            Event(seq=5, seat=0, type="play", cards=["1R", "1B"]),
            Event(seq=6, seat=0, type="reverse"),
            Event(seq=7, seat=1, type="flip", slot=1, cards=["10V"]),
            Event(seq=8, seat=1, type="flip", slot=0),
            Event(seq=9, seat=1, type="pickup", count=5),
            Event(seq=10, seat=1, type="draw", count=1),
            Event(seq=11, seat=0, type="clear", kind="clear+2"),
            Event(seq=12, seat=0, type="out", place=1),
            Event(seq=13, seat=2, type="fault", kind="timeout", detail="late by 40 ms"),
            Event(seq=14, seat=2, type="disqualified", detail="3 strikes"),
        ],
        phase="play",
        turn=88,
        pending="swap",
    )


def _samples() -> list[tuple[str, Any]]:
    rules = Rules(
        deck=Deck(colours="RYGB", copies=2, clear=4, clear_plus1=3, clear_plus2=1),
        play_for_places=True,
        draw_instead_of_playing=True,
        reverses=True,
        scoring=True,
        pile_swap=True,
        sabotage=True,
        colour_run=True,
        one_draw_per_clear2=True,
        turn_limit=300,
    )
    request = ActRequest(
        apiversion="1",
        game_id="g-7",
        request_id="g-7-88",
        seat=1,
        turn=88,
        deadline_ms=950,
        bank_ms=4000,
        state=_state(),
        legal=list(ACTIONS) + [Swap("C+1", "7G", target=0)],
    )
    return [
        ("BotInfo", BotInfo(apiversion="1", name="greedy", author="ann", version="1.0")),
        ("BotInfo", BotInfo(apiversion="1", name="x")),
        (
            "GameStart",
            GameStart(
                apiversion="1",
                game_id="g-7",
                seat=1,
                players=["a", "b", "c"],
                rules=rules,
                timeouts=Timeouts(move_ms=200, bank_ms=5000),
            ),
        ),
        (
            "GameStart",
            GameStart(
                apiversion="1",
                game_id="g-8",
                seat=0,
                players=["a", "b"],
                rules=Rules(deck="italian"),
                timeouts=Timeouts(),
            ),
        ),
        ("ActRequest", request),
        ("ActRequest", msgspec.structs.replace(request, bank_ms=None, legal=[Pickup()])),
        ("ActReply", ActReply(request_id="g-7-88", index=3)),
        *[("ActReply", ActReply(request_id="r", action=a)) for a in ACTIONS],
        (
            "GameEnd",
            GameEnd(
                apiversion="1",
                game_id="g-7",
                seat=1,
                places=[1, 2, 3],
                adjudicated=True,
                disqualified=[2],
                faults=[
                    Fault(kind="timeout", turn=3, detail="late", overrun_ms=12.5),
                    Fault(kind="illegal", turn=4),
                ],
                points=[0, 17, 40],
            ),
        ),
        (
            "GameEnd",
            GameEnd(
                apiversion="1",
                game_id="g-9",
                seat=0,
                places=[1, 2],
                adjudicated=False,
                disqualified=[],
                faults=[],
            ),
        ),
        *[("Action", a) for a in ACTIONS],
        ("State", _state()),
    ]


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize(("name", "message"), _samples(), ids=lambda x: x if isinstance(x, str) else "")
def test_round_trip_and_schema(name: str, message: Any) -> None:
    data = encode(message)
    tp = Action if name == "Action" else type(message)
    assert msgspec.json.decode(data, type=tp) == message
    errors = list(_validator(name).iter_errors(json.loads(data)))
    assert not errors, [e.message for e in errors]


def test_round_trip_through_codec() -> None:
    for name, message in _samples():
        data = encode(message)
        decoder = {
            "BotInfo": decode_bot_info,
            "GameStart": decode_game_start,
            "ActRequest": decode_act_request,
            "ActReply": decode_reply,
            "GameEnd": decode_game_end,
            "Action": decode_action,
            "State": decode_state,
        }[name]
        assert decoder(data) == message


def test_examples_match_schema() -> None:
    for line in ACTION_LINES.splitlines():
        assert not list(_validator("Action").iter_errors(json.loads(line)))
    assert not list(_validator("State").iter_errors(json.loads(STATE_EXAMPLE)))
    assert not list(_validator("GameStart").iter_errors(json.loads(GAME_START_MINIMAL)))
    assert not list(_validator("ActRequest").iter_errors(json.loads(ACT_REQUEST_MINIMAL)))
    assert not list(_validator("GameEnd").iter_errors(json.loads(GAME_END_MINIMAL)))


@pytest.mark.parametrize(
    ("reply", "ok"),
    [
        ({"request_id": "r", "index": 0}, True),
        ({"request_id": "r", "action": {"type": "pickup"}}, True),
        ({"request_id": "r", "index": None, "action": {"type": "pickup"}}, True),
        ({"request_id": "r", "index": 0, "debug": {"eval": 0.3}}, True),
        ({"request_id": "r"}, False),
        ({"request_id": "r", "index": 0, "action": {"type": "pickup"}}, False),
        ({"request_id": "r", "index": -1}, False),
        ({"request_id": "r", "index": "0"}, False),
        ({"request_id": "r", "action": {"type": "jump"}}, False),
        ({"index": 0}, False),
    ],
)
def test_reply_schema_agrees_with_decoder(reply: dict[str, Any], ok: bool) -> None:
    assert _validator("ActReply").is_valid(reply) is ok
    data = json.dumps(reply).encode()
    if ok:
        decode_reply(data)
    else:
        with pytest.raises(ProtocolError):
            decode_reply(data)


def test_rules_schema_admits_fields_added_later() -> None:
    start = json.loads(GAME_START_MINIMAL)
    start["rules"]["a_future_variant"] = True
    assert _validator("GameStart").is_valid(start)


def test_presets_round_trip() -> None:
    for deck in DECK_PRESETS.values():
        assert msgspec.json.decode(encode(deck), type=Deck) == deck


def test_depends_only_on_msgspec_and_stdlib() -> None:
    # Whatever the interpreter and msgspec load themselves is not protocol's doing.
    code = (
        "import sys, msgspec, msgspec.json, msgspec.inspect, msgspec.structs;"
        "before = set(sys.modules);"
        "import protocol, protocol.schema, protocol.codec, protocol.signing;"
        "new = {m.split('.')[0] for m in set(sys.modules) - before};"
        "extra = sorted(m for m in new if m not in sys.stdlib_module_names and m != 'protocol');"
        "print(','.join(extra))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == ""
