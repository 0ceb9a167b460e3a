"""Request signing (PROTOCOL.md "Transport").

Where the league gives a bot a secret, every request the referee sends carries
``X-Referee-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed by the
secret>``; the bot recomputes it over the raw body bytes it received (before
any JSON parsing) and refuses the request if it differs.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

__all__ = ["HEADER", "sign", "verify"]

#: The HTTP header carrying the signature.
HEADER: Final = "X-Referee-Signature"

_PREFIX: Final = "sha256="


def _key(secret: str | bytes) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def sign(secret: str | bytes, body: bytes) -> str:
    """The header value for `body`: ``"sha256=<lower-case hex HMAC-SHA256>"`` (a str secret is UTF-8 encoded)."""
    return _PREFIX + hmac.new(_key(secret), body, hashlib.sha256).hexdigest()


def verify(secret: str | bytes, body: bytes, header_value: str | None) -> bool:
    """Whether `header_value` is the signature of `body` under `secret` (constant-time compare).

    A missing header (None) or a malformed value is simply ``False``. The
    ``sha256=`` prefix and the hex digits are compared case-insensitively;
    surrounding blanks are ignored.
    """
    if header_value is None:
        return False
    given = header_value.strip().lower().encode("utf-8", "replace")
    expected = sign(secret, body).encode("ascii")
    return hmac.compare_digest(expected, given)
