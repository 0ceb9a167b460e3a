"""protocol.codec: strict decoding of bot replies, with fault kinds and clear messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocol import (
    ActReply,
    Flip,
    Pickup,
    Play,
    ProtocolError,
    Swap,
    decode_act_request,
    decode_action,
    decode_bot_info,
    decode_game_end,
    decode_game_start,
    decode_reply,
    encode,
)
from protocol.messages import Rules, Timeouts


def test_valid_replies() -> None:
    assert decode_reply(b'{"request_id": "r1", "index": 3}', "r1") == ActReply(request_id="r1", index=3)
    assert decode_reply('{"request_id": "r1", "action": {"type": "pickup"}}', "r1") == ActReply(
        request_id="r1", action=Pickup()
    )
    # a null counts as absent
    assert decode_reply(b'{"request_id": "r1", "index": null, "action": {"type": "flip", "slot": 0}}') == (
        ActReply(request_id="r1", action=Flip(0))
    )
    # unknown top-level fields are allowed (debug info)
    reply = decode_reply(b'{"request_id": "r1", "index": 0, "debug": {"eval": [1, 2]}, "ms": 3}', "r1")
    assert reply == ActReply(request_id="r1", index=0)
    # request_id not checked when not given
    assert decode_reply(b'{"request_id": "other", "index": 0}').request_id == "other"
    # V5b sabotage swap
    assert decode_reply(
        b'{"request_id": "r", "action": {"type": "swap", "give": "3R", "take": "9B", "target": 2}}'
    ).action == Swap("3R", "9B", target=2)


def _fails(data: bytes | str, request_id: str | None = "r1") -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode_reply(data, request_id)
    return info.value


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "reply is not valid JSON"),
        (b"garbage", "reply is not valid JSON"),
        (b'{"request_id": "r1", "index": 0', "reply is not valid JSON"),
        (b"\xff\xfe{}", "reply is not valid JSON"),
        (b"[1, 2]", "Expected `object`, got `array`"),
        (b"null", "Expected `object`, got `null`"),
        (b'{"index": 0}', "missing required field `request_id`"),
        (b'{"request_id": 1, "index": 0}', "Expected `str`, got `int` - at `$.request_id`"),
        (b'{"request_id": "r1", "index": "0"}', "Expected `int | null`, got `str` - at `$.index`"),
        (b'{"request_id": "r1", "index": 1.0}', "got `float` - at `$.index`"),
        (b'{"request_id": "r1", "index": true}', "got `bool` - at `$.index`"),
        (b'{"request_id": "r1", "index": -1}', "Expected `int` >= 0 - at `$.index`"),
        (b'{"request_id": "r1", "action": "pickup"}', "got `str` - at `$.action`"),
        (b'{"request_id": "r1", "action": {"type": "play", "cards": "5R"}}', "at `$.action.cards`"),
        (b'{"request_id": "r1", "action": {"type": "flip", "slot": "1"}}', "at `$.action.slot`"),
        (b'{"request_id": "r1", "action": {"type": "flip"}}', "missing required field `slot`"),
    ],
)
def test_bad_json(data: bytes, words: str) -> None:
    error = _fails(data)
    assert error.kind == "bad_json"
    assert words in error.message
    assert str(error).startswith("bad_json: ")


def test_neither_index_nor_action() -> None:
    for data in (b'{"request_id": "r1"}', b'{"request_id": "r1", "index": null, "action": null}'):
        error = _fails(data)
        assert (error.kind, error.message) == ("bad_json", "reply has neither 'index' nor 'action'; send one")


def test_both_index_and_action() -> None:
    error = _fails(b'{"request_id": "r1", "index": 0, "action": {"type": "pickup"}}')
    assert (error.kind, error.message) == ("bad_json", "reply has both 'index' and 'action'; send one")


@pytest.mark.parametrize("kind", ['"jump"', '"Play"', "7", "null"])
def test_unknown_action_type(kind: str) -> None:
    error = _fails(f'{{"request_id": "r1", "action": {{"type": {kind}, "cards": []}}}}')
    assert error.kind == "bad_json"
    assert error.message.startswith(f"unknown action type {json.loads(kind)!r} in 'action'")
    assert "choose_up, play, flip, pickup, draw, swap, pass" in error.message


def test_action_without_type() -> None:
    error = _fails(b'{"request_id": "r1", "action": {"cards": ["5R"]}}')
    assert error.kind == "bad_json"
    assert error.message.startswith("'action' has no 'type'")


def test_unknown_field_in_action() -> None:
    error = _fails(
        b'{"request_id": "r1", "action": {"type": "swap", "give": "3R", "take": "9B", "targte": 1}}'
    )
    assert error.kind == "bad_json"
    assert error.message == (
        "action of type 'swap' has unknown field(s) 'targte'; it takes 'give', 'take', 'target'"
    )
    error = _fails(b'{"request_id": "r1", "action": {"type": "pickup", "cards": []}}')
    assert error.message == "action of type 'pickup' has unknown field(s) 'cards'; it takes no other fields"


def test_wrong_request_id() -> None:
    error = _fails(b'{"request_id": "r0", "index": 0}', "r1")
    assert error.kind == "wrong_request_id"
    assert error.message == "reply is for request_id 'r0', expected 'r1'"
    # a stale reply is reported as such even if it is malformed otherwise
    assert _fails(b'{"request_id": "r0", "index": 0, "action": {"type": "draw"}}', "r1").kind == (
        "wrong_request_id"
    )


def test_protocol_error_attributes() -> None:
    error = ProtocolError("bad_json", "what")
    assert (error.kind, error.message, str(error)) == ("bad_json", "what", "bad_json: what")
    assert error.args == ("bad_json", "what")


def test_decode_action_errors() -> None:
    assert decode_action(b'{"type": "play", "cards": ["5R"]}') == Play(("5R",))
    with pytest.raises(ProtocolError, match="unknown action type 'jump' in action"):
        decode_action(b'{"type": "jump"}')
    with pytest.raises(ProtocolError, match="action is not valid JSON"):
        decode_action(b"{")


@pytest.mark.parametrize(
    ("decoder", "what"),
    [
        (decode_bot_info, "GET / reply"),
        (decode_game_start, "GameStart"),
        (decode_act_request, "ActRequest"),
        (decode_game_end, "GameEnd"),
    ],
)
def test_bot_side_decoders_raise_protocol_error(decoder: object, what: str) -> None:
    assert callable(decoder)
    with pytest.raises(ProtocolError) as info:
        decoder(b"not json")
    assert info.value.kind == "bad_json"
    assert info.value.message.startswith(f"{what} is not valid JSON")
    with pytest.raises(ProtocolError) as info:
        decoder(b'{"apiversion": 1}')
    assert info.value.kind == "bad_json"
    assert info.value.message.startswith(f"{what} does not match the protocol: ")


def test_game_start_tolerates_rule_fields_added_later() -> None:
    # PROTOCOL.md: the referee may add fields; a bot built on an older
    # protocol/ must still decode GameStart. (League files are checked
    # strictly by the referee's own loader.)
    data = (
        b'{"apiversion": "1", "game_id": "g", "seat": 0, "players": ["a", "b"],'
        b' "rules": {"some_future_variant": true}, "timeouts": {"future_ms": 1}}'
    )
    start = decode_game_start(data)
    assert start.rules == Rules() and start.timeouts == Timeouts()


def test_game_end_without_apiversion() -> None:
    # PROTOCOL.md lists no apiversion for GameEnd: it defaults to "1".
    end = decode_game_end(
        b'{"game_id": "g", "seat": 0, "places": [1, 2], "adjudicated": false,'
        b' "disqualified": [], "faults": []}'
    )
    assert end.apiversion == "1"


def test_encode_is_compact_json() -> None:
    assert encode(ActReply(request_id="r", index=0)) == b'{"request_id":"r","index":0,"action":null}'
    assert encode({"a": [1]}) == b'{"a":[1]}'


DEEP = 100_000


@pytest.mark.parametrize(
    "data",
    [
        b'{"request_id":"r1","index":0,"x":' + b"[" * DEEP + b"]" * DEEP + b"}",
        b'{"request_id":"r1","action":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}",
    ],
)
def test_a_reply_nested_too_deeply_is_bad_json_not_a_crash(data: bytes) -> None:
    """A hostile bot's deeply nested reply (msgspec stops at ~1000 levels
    with a RecursionError) is the bot's bad_json fault (issue 14)."""
    error = _fails(data)
    assert error.kind == "bad_json" and "nested too deeply" in str(error)


def test_a_deep_reply_of_the_wrong_shape_is_bad_json() -> None:
    """Refused by type at once; the lenient second look that words the
    message must not recurse into it either."""
    assert _fails(b"[" * DEEP + b"]" * DEEP).kind == "bad_json"


@pytest.mark.parametrize("decode", [decode_bot_info, decode_action])
def test_a_handshake_or_action_nested_too_deeply_is_bad_json(decode: Any) -> None:
    with pytest.raises(ProtocolError, match="nested too deeply") as info:
        decode(b'{"type":"pickup","name":"x","x":' + b"[" * DEEP + b"]" * DEEP + b"}")
    assert info.value.kind == "bad_json"
