"""Encoding and decoding of protocol messages, with reusable msgspec encoders/decoders.

Referee side: ``decode_reply`` (an /act reply) and ``decode_bot_info`` (the
``GET /`` reply). Bot side: ``decode_game_start``, ``decode_act_request``,
``decode_game_end``. Every decoder raises ``ProtocolError`` (never a msgspec
exception) with a ``kind`` from ``FAULT_KINDS`` and a message that says what
exactly is wrong.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

import msgspec

from .messages import (
    ACTION_TYPES,
    Action,
    ActReply,
    ActRequest,
    BotInfo,
    GameEnd,
    GameStart,
    State,
    check_reply,
)

__all__ = [
    "ProtocolError",
    "decode_act_request",
    "decode_action",
    "decode_bot_info",
    "decode_game_end",
    "decode_game_start",
    "decode_reply",
    "decode_state",
    "encode",
]

T = TypeVar("T")


class ProtocolError(Exception):
    """A message that does not follow the protocol.

    `kind` is a fault kind ("bad_json" or "wrong_request_id"); `message` says
    what exactly is wrong, fit to be shown to the bot's author.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(kind, message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


#: One encoder for every message (msgspec encoders are not type-specific).
ENCODER: Final = msgspec.json.Encoder()

REPLY_DECODER: Final = msgspec.json.Decoder(ActReply)
BOT_INFO_DECODER: Final = msgspec.json.Decoder(BotInfo)
GAME_START_DECODER: Final = msgspec.json.Decoder(GameStart)
ACT_REQUEST_DECODER: Final = msgspec.json.Decoder(ActRequest)
GAME_END_DECODER: Final = msgspec.json.Decoder(GameEnd)
ACTION_DECODER: Final = msgspec.json.Decoder(Action)
STATE_DECODER: Final = msgspec.json.Decoder(State)

# Lenient look at a reply, used only to word error messages and to check the
# fields of the action object.
_RAW_DECODER: Final = msgspec.json.Decoder()


def encode(obj: Any) -> bytes:
    """Encode a message (or any msgspec-encodable value) to JSON bytes."""
    return ENCODER.encode(obj)


#: msgspec refuses JSON nested deeper than this with a RecursionError; a
#: hostile bot's reply or handshake nested that deep is a bad_json fault.
_TOO_DEEP: Final = (
    "is nested too deeply to be a protocol message (JSON arrays or objects nested ~1000 levels)"
)


def _decode(decoder: msgspec.json.Decoder[T], data: bytes | str, what: str) -> T:
    try:
        return decoder.decode(data)
    except RecursionError:
        raise ProtocolError("bad_json", f"{what} {_TOO_DEEP}") from None
    except msgspec.ValidationError as e:
        raise ProtocolError("bad_json", f"{what} does not match the protocol: {e}") from None
    except msgspec.DecodeError as e:
        raise ProtocolError("bad_json", f"{what} is not valid JSON: {e}") from None


def _explain_action(action: object, where: str) -> str | None:
    """A clearer message than msgspec's for a bad action object, if there is one."""
    if not isinstance(action, dict):
        return None
    known = ", ".join(ACTION_TYPES)
    if "type" not in action:
        return f"{where} has no 'type'; it must be one of {known}"
    kind = action["type"]
    if not isinstance(kind, str) or kind not in ACTION_TYPES:
        return f"unknown action type {kind!r} in {where}; it must be one of {known}"
    return None


def decode_reply(data: bytes | str, request_id: str | None = None) -> ActReply:
    """Decode and check a bot's reply to ``POST /act``.

    Types are strict (no "1" for 1), exactly one of `index` and `action` must be
    given (a null counts as absent), the action object may hold only its own
    fields, and, when `request_id` is given, the reply must echo it. Unknown
    top-level fields are ignored. Whether the action is legal is not checked
    here.

    Raises ``ProtocolError`` of kind "bad_json" or "wrong_request_id".
    """
    try:
        reply = REPLY_DECODER.decode(data)
    except RecursionError:
        raise ProtocolError("bad_json", f"reply {_TOO_DEEP}") from None
    except msgspec.ValidationError as e:
        message = f"reply does not match the protocol: {e}"
        try:
            raw = _RAW_DECODER.decode(data)
        except (msgspec.DecodeError, RecursionError):  # typed decoding stops earlier
            raw = None
        if isinstance(raw, dict):
            better = _explain_action(raw.get("action"), "'action'")
            if better is not None:
                message = better
        raise ProtocolError("bad_json", message) from None
    except msgspec.DecodeError as e:
        raise ProtocolError("bad_json", f"reply is not valid JSON: {e}") from None

    if request_id is not None and reply.request_id != request_id:
        raise ProtocolError(
            "wrong_request_id",
            f"reply is for request_id {reply.request_id!r}, expected {request_id!r}",
        )
    try:
        check_reply(reply)
    except ValueError as e:
        raise ProtocolError("bad_json", str(e)) from None
    if reply.action is not None:
        _check_action_fields(data, reply.action)
    return reply


def _check_action_fields(data: bytes | str, action: Action) -> None:
    """Refuse fields the action type does not have (a misspelt `target` must not be dropped)."""
    raw = _RAW_DECODER.decode(data)
    fields = raw["action"]
    allowed = {"type", *type(action).__struct_fields__}
    unknown = sorted(k for k in fields if k not in allowed)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        have = ", ".join(repr(k) for k in type(action).__struct_fields__) or "no other fields"
        raise ProtocolError(
            "bad_json",
            f"action of type {action.__struct_config__.tag!r} has unknown field(s) {names}; it takes {have}",
        )


def decode_action(data: bytes | str) -> Action:
    """Decode one action object. Raises ``ProtocolError`` ("bad_json")."""
    try:
        return ACTION_DECODER.decode(data)
    except RecursionError:
        raise ProtocolError("bad_json", f"action {_TOO_DEEP}") from None
    except msgspec.ValidationError as e:
        message = f"action does not match the protocol: {e}"
        try:
            better = _explain_action(_RAW_DECODER.decode(data), "action")
        except (msgspec.DecodeError, RecursionError):  # typed decoding stops earlier
            better = None
        raise ProtocolError("bad_json", better or message) from None
    except msgspec.DecodeError as e:
        raise ProtocolError("bad_json", f"action is not valid JSON: {e}") from None


def decode_bot_info(data: bytes | str) -> BotInfo:
    """Decode a bot's reply to ``GET /``. Raises ``ProtocolError`` ("bad_json")."""
    return _decode(BOT_INFO_DECODER, data, "GET / reply")


def decode_game_start(data: bytes | str) -> GameStart:
    """Decode the body of ``POST /start`` (bot side). Raises ``ProtocolError`` ("bad_json")."""
    return _decode(GAME_START_DECODER, data, "GameStart")


def decode_act_request(data: bytes | str) -> ActRequest:
    """Decode the body of ``POST /act`` (bot side). Raises ``ProtocolError`` ("bad_json")."""
    return _decode(ACT_REQUEST_DECODER, data, "ActRequest")


def decode_game_end(data: bytes | str) -> GameEnd:
    """Decode the body of ``POST /end`` (bot side). Raises ``ProtocolError`` ("bad_json")."""
    return _decode(GAME_END_DECODER, data, "GameEnd")


def decode_state(data: bytes | str) -> State:
    """Decode a State object on its own. Raises ``ProtocolError`` ("bad_json")."""
    return _decode(STATE_DECODER, data, "State")
