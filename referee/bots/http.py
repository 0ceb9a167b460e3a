"""The HTTP transport: a bot is an HTTP/1.1 server (PROTOCOL.md "Transport").

One :class:`aiohttp.ClientSession` serves every bot of a referee (make it with
:func:`make_session`): connections are kept alive and limited per bot (aiohttp
pools by host and port, so the per-host limit is a per-bot limit). A bot on a
unix socket (a sandboxed container) gets a session of its own over an
:class:`aiohttp.UnixConnector`.

Everything a bot can do wrong comes back as data: ``act`` returns an
:class:`~referee.bots.base.ActOutcome` holding the decoded reply or a
:class:`~protocol.Fault` (``timeout`` with the overrun, ``http_status``,
``bad_json``, ``too_large``, ``wrong_request_id``, ``connection``), never an
exception. Limits are enforced by cancelling the call
(:func:`~referee.bots.deadline.deadline`: asyncio.timeout on one timer shared
by all calls); reply bodies are read in chunks and abandoned as soon as they
pass the size cap, so a 10 MB reply costs at most the cap in memory.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Mapping
from typing import Final

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from protocol.codec import ENCODER, ProtocolError, decode_bot_info, decode_reply
from protocol.messages import APIVERSION, BotInfo, Fault, GameEnd, GameStart
from protocol.signing import HEADER, sign
from referee import version

from .base import ActOutcome, ActsOnBytes, BotError, BotUnreachable, Endpoint, display_name
from .clock import HANDSHAKE_S
from .deadline import deadline
from .netpolicy import canonical

__all__ = [
    "DEFAULT_CONNECTIONS",
    "DEFAULT_MAX_BODY",
    "HttpBot",
    "PinnedResolver",
    "make_session",
]

#: Size cap of a reply body, in bytes (PROTOCOL.md "Faults": "larger than the size cap").
DEFAULT_MAX_BODY: Final = 64 * 1024

#: Connections the referee keeps open to one bot at most.
DEFAULT_CONNECTIONS: Final = 4

# Longest piece of bot-controlled text (an HTTP reason phrase) put into a detail.
_SNIPPET: Final = 80

#: What ``GET /`` must answer, for error messages.
INFO_SHAPE: Final = f'{{"apiversion": "{APIVERSION}", "name": ..., "author": ..., "version": ...}}'

# Errors that may mean a kept-alive connection had been closed by the bot just
# as the request went out: the request is sent once more, on a new connection.
_STALE: Final = (aiohttp.ServerDisconnectedError, aiohttp.ClientConnectionResetError)


def _user_agent() -> str:
    return f"referee/{version()} (3UP 3DOWN bot protocol {APIVERSION})"


class PinnedResolver(AbstractResolver):
    """A resolver that never asks DNS: it answers the pinned ``(host, port)``
    pairs with their address and refuses every other host (``OSError``, a
    ``connection`` fault), so a name that resolves elsewhere later is not
    followed (DNS rebinding). `pins` maps (host as in the URL, port) to an
    IP address."""

    def __init__(self, pins: Mapping[tuple[str, int], str]) -> None:
        self._pins = {(host.lower(), port): canonical(address) for (host, port), address in pins.items()}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        ip = self._pins.get((host.lower(), port))
        if ip is None:
            raise OSError(
                errno.EHOSTUNREACH,
                f"{host}:{port} is not the host and port this bot was admitted with "
                "(the referee connects to the bot's pinned address only)",
            )
        ip_family = socket.AF_INET if isinstance(ip, ipaddress.IPv4Address) else socket.AF_INET6
        if family not in (socket.AF_UNSPEC, ip_family):
            raise OSError(errno.EAFNOSUPPORT, f"the pinned address {ip} is not of the family asked for")
        return [
            {
                "hostname": host,
                "host": str(ip),
                "port": port,
                "family": ip_family,
                "proto": socket.IPPROTO_TCP,
                "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            }
        ]

    async def close(self) -> None:
        pass


def make_session(
    connections_per_bot: int = DEFAULT_CONNECTIONS,
    *,
    unix_socket: str | None = None,
    pins: Mapping[tuple[str, int], str] | None = None,
) -> aiohttp.ClientSession:
    """A client session fit for talking to bots; call it inside a running event loop.

    Keep-alive connections, at most `connections_per_bot` to each bot, no
    aiohttp timeouts (the transports cancel calls themselves), no redirects
    followed and no compressed replies accepted (``Accept-Encoding:
    identity``; a compressed body could expand past the size cap), no proxy
    from the environment. With `pins` (``{(host, port): address}``) the
    session connects to those hosts at those addresses only and to no other
    host (:class:`PinnedResolver`); the ``Host`` header, TLS SNI and the
    certificate check still use the URL's host.
    """
    connector: aiohttp.BaseConnector
    if unix_socket is not None:
        if pins is not None:
            raise ValueError("a unix-socket session has no addresses to pin")
        connector = aiohttp.UnixConnector(path=unix_socket, limit=connections_per_bot)
    elif pins is not None:
        connector = aiohttp.TCPConnector(
            limit=0,
            limit_per_host=connections_per_bot,
            resolver=PinnedResolver(pins),
            use_dns_cache=False,
        )
    else:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=connections_per_bot)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(),
        auto_decompress=False,
        trust_env=False,
        headers={"Accept-Encoding": "identity", "User-Agent": _user_agent()},
    )


class _TooLarge(Exception):
    def __init__(self, size: int | None, cap: int) -> None:
        what = f"{size} bytes" if size is not None else "more than that"
        super().__init__(f"reply is larger than the size cap of {cap} bytes ({what})")


async def _read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The body, read chunk by chunk; :class:`_TooLarge` as soon as it passes `cap`."""
    length = response.content_length
    if length is not None and length > cap:
        raise _TooLarge(length, cap)
    content = response.content
    first = await content.readany()
    if not first or len(first) == length:
        return first
    if len(first) > cap:
        raise _TooLarge(None, cap)
    chunks = [first]
    size = len(first)
    while True:
        chunk = await content.readany()
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > cap:
            raise _TooLarge(None, cap)
        chunks.append(chunk)


def describe(error: BaseException) -> str:
    """A short, plain description of a connection-level failure."""
    if isinstance(error, aiohttp.ClientConnectorError):
        os_error = error.os_error
        if isinstance(os_error, ConnectionRefusedError) or os_error.errno == errno.ECONNREFUSED:
            why = "connection refused"
        else:
            why = os_error.strerror or str(os_error) or type(os_error).__name__
        return f"could not connect ({why}): is the bot running and listening there?"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "the bot closed the connection without replying"
    if isinstance(error, aiohttp.ClientConnectionResetError) or (
        isinstance(error, OSError) and error.errno in (errno.ECONNRESET, errno.EPIPE)
    ):
        return "the bot reset the connection"
    if isinstance(error, aiohttp.ClientPayloadError):
        return f"the connection failed in the middle of the reply ({error})"
    if isinstance(error, aiohttp.ClientResponseError):
        return f"not a valid HTTP response ({error.message})"
    if isinstance(error, aiohttp.ClientError | OSError):
        return f"connection error: {error}"
    return f"unexpected error: {type(error).__name__}: {error}"


def _clip(text: str) -> str:
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= _SNIPPET else text[: _SNIPPET - 3] + "..."


class HttpBot(ActsOnBytes):
    """A bot reached over HTTP at `url` (``http://127.0.0.1:8001``).

    `url` may also be ``unix:/path/to.sock`` (the league file's form), which
    is ``http://localhost`` over that unix socket. `session` is the referee's
    shared session (see :func:`make_session`); when None the bot opens one of
    its own on first use and closes it in :meth:`close`. `unix_socket` is the
    path of a unix socket to talk over instead of TCP (the host in `url` is
    then only a name); such a bot always owns its session. `address` pins the
    bot to an IP address (a team's bot, admitted by
    :func:`~referee.bots.netpolicy.admit_url`): every connection goes to that
    address whatever the URL's host resolves to, while the ``Host`` header,
    TLS SNI and the certificate check use the URL's host; such a bot owns its
    session too (pools are per host and port, so a shared session could mix
    two teams' bots at one name), which connects to no other host. `secret`
    signs every request (``X-Referee-Signature``). `max_body` caps the reply
    size. Usable as an async context manager.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        secret: str | bytes | None = None,
        session: aiohttp.ClientSession | None = None,
        unix_socket: str | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        connections: int = DEFAULT_CONNECTIONS,
        address: str | None = None,
    ) -> None:
        if url.startswith("unix:"):
            if unix_socket is not None:
                raise ValueError("give the socket either as unix:/path or as unix_socket")
            unix_socket = url[len("unix:") :]
            url = "http://localhost"
        base = URL(url.rstrip("/"))
        if base.scheme not in ("http", "https") or not base.host:
            raise ValueError(f"a bot URL looks like http://127.0.0.1:8001, not {url!r}")
        if unix_socket is not None and session is not None:
            raise ValueError("a unix-socket bot owns its session: do not pass one")
        self.url = str(base)
        #: The pinned IP address (canonical), or None: the host is resolved
        #: on every new connection.
        self.address: str | None = None
        self._pins: dict[tuple[str, int], str] | None = None
        if address is not None:
            self.address = self._pin(base, address, unix_socket, session)
            self._pins = {(base.raw_host or "", base.port or 0): self.address}
        self.secret = secret
        self.unix_socket = unix_socket
        self.max_body = max_body
        self.connections = connections
        #: The bot's reply to the last successful handshake.
        self.info: BotInfo | None = None
        self._name = name
        self._session = session
        self._own_session = session is None
        self._root = base.with_path(base.path.rstrip("/") + "/")
        self._paths = {p: URL(self.url + "/" + p) for p in ("start", "act", "end")}
        self._act = self._paths["act"]
        self._plain = {"Content-Type": "application/json"}

    @staticmethod
    def _pin(base: URL, address: str, unix_socket: str | None, session: aiohttp.ClientSession | None) -> str:
        if unix_socket is not None:
            raise ValueError("a bot on a unix socket has no address to pin")
        if session is not None:
            raise ValueError("a bot pinned to an address owns its session: do not pass one")
        try:
            ip = canonical(address)
        except ValueError:
            raise ValueError(f"the pinned address of {base} is not an IP address: {address!r}") from None
        host = base.raw_host or ""
        if ":" not in host and not host.replace(".", "").isdigit():
            return str(ip)  # a name: the resolver answers it with `ip`
        try:  # aiohttp connects to an IP address in the URL without a resolver
            literal = canonical(host)
        except ValueError:
            raise ValueError(f"{base} cannot be pinned: its host is not a plain IP address") from None
        if literal != ip:
            raise ValueError(f"{base} is at {literal}: it cannot be pinned to {ip}")
        return str(ip)

    # ---------------------------------------------------------------- basics

    @property
    def name(self) -> str:
        return display_name(
            self._name, self.info, f"unix:{self.unix_socket}" if self.unix_socket else self.url
        )

    def __repr__(self) -> str:
        where = f" via {self.unix_socket}" if self.unix_socket else ""
        if self.address is not None:
            where = f" at {self.address}"
        return f"HttpBot({self.url!r}{where})"

    async def __aenter__(self) -> HttpBot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            if not self._own_session:
                raise RuntimeError("the shared client session has been closed")
            self._session = make_session(self.connections, unix_socket=self.unix_socket, pins=self._pins)
        return self._session

    def _headers(self, body: bytes) -> dict[str, str]:
        if self.secret is None:
            return self._plain
        return {"Content-Type": "application/json", HEADER: sign(self.secret, body)}

    async def _exchange(self, method: str, url: URL, body: bytes | None, cap: int) -> tuple[int, str, bytes]:
        """One request: (status, reason, body). The body is read only for a 2xx answer."""
        session = self._session
        if session is None or session.closed:
            session = self._get_session()
        headers = self._headers(body if body is not None else b"")
        retried = False
        while True:
            try:
                response = await session.request(
                    method, url, data=body, headers=headers, allow_redirects=False
                )
            except _STALE:
                if retried:
                    raise
                retried = True
                continue
            try:
                status = response.status
                reason = response.reason or ""
                if not 200 <= status < 300:
                    return status, reason, b""
                data = await _read_capped(response, cap)
            except BaseException:
                response.close()
                raise
            response.release()
            return status, reason, data

    # ------------------------------------------------------------- the calls

    async def handshake(self, timeout_s: float = HANDSHAKE_S) -> BotInfo:
        """``GET /``: check the bot answers and speaks protocol version 1.

        Raises :class:`BotUnreachable` when there is no answer and
        :class:`BotError` for a wrong answer, each saying what to fix.
        """
        where = f"{self.url}" + (f" (unix socket {self.unix_socket})" if self.unix_socket else "")
        try:
            async with deadline(timeout_s):
                status, reason, data = await self._exchange("GET", self._root, None, self.max_body)
        except TimeoutError:
            raise BotUnreachable(f"{where}: GET / got no answer within {timeout_s * 1000:.0f} ms") from None
        except _TooLarge as e:
            raise BotError(f"{where}: GET / {e}") from None
        except Exception as e:
            raise BotUnreachable(f"{where}: GET / failed: {describe(e)}") from None
        if status != 200:
            raise BotError(
                f"{where}: GET / answered HTTP {status} {_clip(reason)}; it must answer 200 with {INFO_SHAPE}"
            )
        try:
            info = decode_bot_info(data)
        except ProtocolError as e:
            raise BotError(f"{where}: {e.message}") from None
        if info.apiversion != APIVERSION:
            raise BotError(
                f"{where}: the bot speaks protocol version {info.apiversion!r} but this "
                f'referee speaks {APIVERSION!r}: answer GET / with "apiversion": "{APIVERSION}"'
            )
        self.info = info
        return info

    async def _notify(self, path: str, body: bytes, timeout_s: float, turn: int) -> Fault | None:
        """POST a /start or /end message: any 2xx will do, the body is ignored.
        A fault is dated `turn` (0 for /start, the game's last turn for /end)."""
        now = asyncio.get_running_loop().time  # the clock the deadline fires on
        start = now()
        try:
            async with deadline(timeout_s):
                status, reason, _ = await self._exchange("POST", self._paths[path], body, self.max_body)
        except TimeoutError:
            elapsed = (now() - start) * 1000
            return Fault(
                kind="timeout",
                turn=turn,
                detail=f"POST /{path}: no answer within {timeout_s * 1000:.0f} ms",
                overrun_ms=round(max(0.0, elapsed - timeout_s * 1000), 3),
            )
        except _TooLarge:
            return None  # the body is ignored anyway; the connection is closed
        except Exception as e:
            return Fault(kind="connection", turn=turn, detail=f"POST /{path}: {describe(e)}")
        if not 200 <= status < 300:
            return Fault(
                kind="http_status",
                turn=turn,
                detail=f"POST /{path} answered HTTP {status} {_clip(reason)}; it must answer 2xx",
            )
        return None

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        return await self._notify("start", ENCODER.encode(message), timeout_s, 0)

    async def end(self, message: GameEnd, timeout_s: float, turn: int) -> Fault | None:
        return await self._notify("end", ENCODER.encode(message), timeout_s, turn)

    async def endpoint(self) -> Endpoint:
        """The URL, secret and pinned address: a worker in another process
        connects to that address too, never resolving the name again."""
        return Endpoint(
            f"unix:{self.unix_socket}" if self.unix_socket else self.url,
            self.secret.decode() if isinstance(self.secret, bytes) else self.secret,
            self.address,
        )

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        """``POST /act`` with an encoded request `body` (for compliance checks
        that send what the Structs cannot express); as :meth:`act`."""
        now = asyncio.get_running_loop().time  # the clock the deadline fires on
        start = now()
        try:
            with deadline(deadline_s):
                status, reason, data = await self._exchange("POST", self._act, body, self.max_body)
        except TimeoutError:
            elapsed = (now() - start) * 1000
            limit = deadline_s * 1000
            return ActOutcome(
                fault=Fault(
                    kind="timeout",
                    turn=turn,
                    detail=f"no reply within {limit:.0f} ms",
                    overrun_ms=round(max(0.0, elapsed - limit), 3),
                ),
                latency_ms=elapsed,
            )
        except _TooLarge as e:
            return ActOutcome(
                fault=Fault(kind="too_large", turn=turn, detail=str(e)),
                latency_ms=(now() - start) * 1000,
            )
        except Exception as e:
            return ActOutcome(
                fault=Fault(kind="connection", turn=turn, detail=describe(e)),
                latency_ms=(now() - start) * 1000,
            )
        latency = (now() - start) * 1000
        if status != 200:
            return ActOutcome(
                fault=Fault(
                    kind="http_status",
                    turn=turn,
                    detail=f"POST /act answered HTTP {status} {_clip(reason)}; "
                    "it must answer 200 with the reply",
                ),
                latency_ms=latency,
            )
        try:
            reply = decode_reply(data, request_id)
        except ProtocolError as e:
            return ActOutcome(fault=Fault(kind=e.kind, turn=turn, detail=e.message), latency_ms=latency)
        return ActOutcome(reply=reply, latency_ms=latency)
