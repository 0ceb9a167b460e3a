"""protocol.signing: X-Referee-Signature (PROTOCOL.md "Transport")."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from protocol.signing import HEADER, sign, verify

BODY = b'{"apiversion":"1","game_id":"g1"}'


def test_header_name() -> None:
    assert HEADER == "X-Referee-Signature"


def test_sign_is_hmac_sha256_hex() -> None:
    expected = hmac.new(b"s3cret", BODY, hashlib.sha256).hexdigest()
    assert sign("s3cret", BODY) == "sha256=" + expected
    assert sign(b"s3cret", BODY) == "sha256=" + expected


def test_known_vector() -> None:
    # RFC 4231 test case 2.
    value = sign("Jefe", b"what do ya want for nothing?")
    assert value == "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


def test_verify_round_trip() -> None:
    assert verify("s3cret", BODY, sign("s3cret", BODY))
    assert verify(b"s3cret", BODY, sign("s3cret", BODY))
    assert verify("sécret", BODY, sign("sécret".encode(), BODY))


def test_verify_tolerates_case_and_blanks() -> None:
    value = sign("s3cret", BODY)
    assert verify("s3cret", BODY, " " + value.upper() + "\r\n")


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "sha256=",
        "sha1=" + sign("s3cret", BODY)[len("sha256=") :],
        sign("s3cret", BODY)[len("sha256=") :],  # no prefix
        sign("wrong", BODY),
        sign("s3cret", BODY + b" "),
        sign("s3cret", BODY)[:-1],
        "sha256=ünïcode",
    ],
)
def test_verify_refuses(header: str | None) -> None:
    assert not verify("s3cret", BODY, header)


def test_wrong_secret() -> None:
    assert not verify("other", BODY, sign("s3cret", BODY))
