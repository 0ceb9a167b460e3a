"""Slow clients do not take the service down (issue 24, item 5).

The attack of the issue against the real ``referee serve`` in a subprocess
under ``ulimit -n 1024``: 1,100 connections sending ``POST /login`` a byte a
second (the headers, or the body after whole headers), from one address or
from forty; a ``GET /`` from another address is answered within 2 s, the error
log stays small, the service's file descriptors stay under its limit, and the
server closes every attacker's connection.

Then the pieces, on real sockets on loopback (127.0.0.0/8: a test client
picks its source address): the cap per client address (429 when its
connections are all busy, the oldest waiting one closed to make room
otherwise), the cap in all (503), a trusted proxy exempt from the cap per
client, a body sent a byte at a time cut while a fast upload passes, an
event stream not cut by the timeouts, the grouping of IPv6 clients by /64,
the log's rate limit, and the soft open-file limit raised at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import resource
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from click.testing import CliRunner

from referee.cli.serve import serve
from referee.web import server as web_server
from referee.web.server import Limits, RepeatFilter, client_key, make_runner
from tests.support.web import Served

ROOT = Path(__file__).resolve().parents[2]

#: Short timeouts, so that the attack test is over in seconds.
FAST = ["--header-timeout", "2", "--body-timeout", "2"]
ATTACKERS = 1100
LOGIN_HEAD = (
    b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    b"Content-Length: 100\r\n\r\n"
)


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


@pytest.fixture
def many_files() -> Iterator[None]:
    """This process opens 1,100 connections and more: its soft limit raised for the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 8192) if hard != resource.RLIM_INFINITY else 8192
    if want < 4096:
        pytest.skip(f"the attack needs 4096 open files in this process, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def start_service(tmp: Path, *args: str) -> Served:
    """``referee serve`` in a subprocess with 1024 open files at most, its stderr in a file, listening."""
    service = await Served.start(
        tmp / "serve.err",
        *("--db", str(tmp / "s.sqlite"), "--port", "0", *args),
        preexec_fn=_limit_files,
    )
    try:
        await service.ready()
    except BaseException:
        await service.close()
        raise
    return service


def fds(service: Served) -> int:
    return len(os.listdir(f"/proc/{service.proc.pid}/fd"))


async def get_root(port: int, timeout: float = 2.0, source: str = "127.0.0.1") -> tuple[bytes, float]:
    """``GET /``: its status line and how long it took (raises TimeoutError past `timeout`)."""
    t0 = time.monotonic()
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            line = await reader.readline()
        finally:
            writer.close()
    return line, time.monotonic() - t0


class Count:
    """How many attackers have trickled for a second (sent their second byte), or are done; `all` once every one is."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.n = 0
        self.all = asyncio.Event()

    def one(self) -> None:
        self.n += 1
        if self.n >= self.total:
            self.all.set()


async def slow_login(port: int, source: str, body_first: bool, connected: Count, ended: list[str]) -> None:
    """One attacker: ``POST /login`` a byte a second, until the server closes the connection."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    except OSError as e:
        ended.append(f"connect: {e}")
        connected.one()
        return
    message = LOGIN_HEAD + b"token=" + b"t" * 94
    if body_first:
        writer.write(LOGIN_HEAD)
        message = message[len(LOGIN_HEAD) :]
    counted = False
    try:
        for i, byte in enumerate(message):
            writer.write(bytes([byte]))
            if i == 1:
                # its second byte, a second after the first: it has been slow for a second,
                # what the server must see before it may call a body slow (a quarter of one)
                connected.one()
                counted = True
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    answer = await reader.read(4096)
                    ended.append(answer.split(b"\r\n", 1)[0].decode(errors="replace") or "closed")
                    return
        ended.append("sent it all")
    except OSError:
        ended.append("reset")
    finally:
        if not counted:
            connected.one()  # answered or cut before its second byte: it holds nothing more
        writer.close()


@pytest.mark.parametrize(
    "addresses, body_first",
    [(1, False), (40, False), (40, True)],
    ids=["headers-from-one-address", "headers-from-40-addresses", "body-from-40-addresses"],
)
async def test_slow_clients_do_not_take_the_service_down(
    tmp_path: Path, many_files: None, addresses: int, body_first: bool
) -> None:
    service = await start_service(tmp_path, *FAST)
    port = await service.ready()
    attack: list[asyncio.Task[None]] = []
    try:
        connected = Count(ATTACKERS)
        ended: list[str] = []
        attack = [
            asyncio.create_task(
                slow_login(port, f"127.0.0.{2 + i % addresses}", body_first, connected, ended)
            )
            for i in range(ATTACKERS)
        ]
        async with asyncio.timeout(60):  # a bound for a broken test, never a wait
            await connected.all.wait()  # every attacker slow for a second already, or done
        try:
            # behind them in the listening queue: answered once the server took up every attacker before it
            line, took = await get_root(port, 2.0)
        except (TimeoutError, OSError) as e:
            raise AssertionError(
                f"GET / under attack: no answer within 2 s ({e!r}); the service has {fds(service)} files open"
            ) from None
        fds_under_attack = fds(service)
        assert line.startswith(b"HTTP/1.1 200"), line
        assert took < 2.0
        assert fds_under_attack < 1024 - 64, f"{fds_under_attack} files open under attack"
        # The header (or body) timeout of 2 s closes every attacker's connection.
        async with asyncio.timeout(20):
            await asyncio.gather(*attack)
        assert len(ended) == ATTACKERS
        assert "sent it all" not in ended
        assert all(
            e.startswith(("HTTP/1.1 408", "HTTP/1.1 429", "HTTP/1.1 503", "closed", "reset")) for e in ended
        ), sorted(set(ended))
        line, took = await get_root(port, 2.0)
        assert line.startswith(b"HTTP/1.1 200") and took < 2.0
        assert fds(service) < 64
    finally:
        for t in attack:
            t.cancel()
        await service.close()
    size = service.log.stat().st_size
    assert size < 100_000, f"the error log grew to {size} bytes: {service.log.read_text()[:2000]}"
    text = service.log.read_text()
    assert "open files: at most 1024" in text
    assert "Traceback" not in text, text[:3000]


# -- the pieces, in this process ---------------------------------------------------------------------------------
class Box:
    """An app on loopback behind a guarded runner: /wait holds its request until released, /upload reads its body."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = 0
        self._waited = asyncio.Condition()  # notified as each /wait comes in
        self.uploaded: list[int] = []

    async def until_waiting(self, n: int) -> None:
        """Until `n` requests to /wait are held (each notifies as it comes in)."""
        async with asyncio.timeout(10):  # a bound for a broken test, never a wait
            async with self._waited:
                await self._waited.wait_for(lambda: self.waiting == n)

    def app(self) -> web.Application:
        async def wait(request: web.Request) -> web.Response:
            self.waiting += 1
            async with self._waited:
                self._waited.notify_all()
            await self.release.wait()
            return web.Response(text="done")

        async def upload(request: web.Request) -> web.Response:
            size = 0
            while chunk := await request.content.read(1 << 16):
                size += len(chunk)
            self.uploaded.append(size)
            return web.Response(text=str(size))

        async def stream(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i in range(int(request.query.get("n", "10"))):
                await resp.write(f"data: {i}\n\n".encode())
                await asyncio.sleep(0.3)
            return resp

        async def hello(request: web.Request) -> web.Response:
            return web.Response(text="hello")

        app = web.Application()
        app.router.add_get("/hello", hello)
        app.router.add_get("/wait", wait)
        app.router.add_post("/upload", upload)
        app.router.add_get("/stream", stream)
        return app


@contextlib.asynccontextmanager
async def guarded(
    box: Box, limits: Limits, max_connections: int = 100
) -> AsyncIterator[tuple[int, web_server.Guard]]:
    runner = make_runner(box.app(), limits, max_connections=max_connections, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port, runner.guard
    finally:
        box.release.set()
        await runner.cleanup()


async def connect(port: int, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def busy(port: int, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await connect(port, source)
    writer.write(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    return reader, writer


async def answer_of(reader: asyncio.StreamReader, timeout: float = 5.0) -> bytes:
    """The first line the server sends, or b"" when it closes without one."""
    async with asyncio.timeout(timeout):
        try:
            return await reader.readline()
        except ConnectionResetError:
            return b""


async def closed(reader: asyncio.StreamReader, timeout: float = 5.0) -> bool:
    async with asyncio.timeout(timeout):
        try:
            while await reader.read(4096):
                pass
        except ConnectionResetError:
            pass
    return True


async def taken_up(port: int) -> None:
    """Until the server took up every connection made before now: a
    ``GET /hello`` from an address of its own, made after them, is answered
    (the listening queue is first in, first out, and the server takes each
    connection up in the order it accepts them)."""
    reader, writer = await connect(port, "127.0.0.9")
    try:
        writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await answer_of(reader)).startswith(b"HTTP/1.1 200")
    finally:
        writer.close()


def test_client_key_groups_ipv6_by_64_and_ipv4_by_address() -> None:
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert client_key("192.0.2.7") != client_key("192.0.2.8")
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    a, b = client_key("2001:db8:1:2::1"), client_key("2001:db8:1:2:ffff:ffff:ffff:fffe")
    assert a == b == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != a
    assert client_key("fe80::1%lo") == "fe80::/64"
    assert client_key("") == "unknown"


async def test_a_client_at_its_cap_is_refused_429_when_busy_and_its_oldest_waiting_connection_makes_room() -> (
    None
):
    box = Box()
    async with guarded(box, Limits(max_per_client=3)) as (port, guard):
        held = [await busy(port, "127.0.0.2") for _ in range(3)]
        await box.until_waiting(3)
        reader, writer = await connect(port, "127.0.0.2")
        line = await answer_of(reader)
        assert line.startswith(b"HTTP/1.1 429"), line
        body = await reader.read()
        assert b"too many connections from 127.0.0.2: at most 3" in body
        writer.close()
        # Another address is not counted with it.
        other = await busy(port, "127.0.0.3")
        await box.until_waiting(4)
        # Connections only waiting (idle, or their headers still arriving) make room: the oldest goes.
        idle = [await connect(port, "127.0.0.4") for _ in range(3)]
        idle[1][1].write(b"GET /wait HTT")
        await taken_up(port)
        assert len(guard.clients.get("127.0.0.4", {})) == 3
        newest = await busy(port, "127.0.0.4")
        assert await closed(idle[0][0])
        await box.until_waiting(5)
        assert guard.counts["refused-client"] == 1 and guard.counts["evicted"] == 1
        box.release.set()
        for reader, writer in [*held, other, newest]:
            assert (await answer_of(reader)).startswith(b"HTTP/1.1 200")
            writer.close()
        for _, writer in idle:
            writer.close()


async def test_the_cap_in_all_answers_503_and_a_trusted_proxy_is_exempt_from_the_cap_per_client() -> None:
    box = Box()
    proxy = (ipaddress.ip_network("127.0.0.5/32"),)
    async with guarded(box, Limits(max_per_client=2, trusted_proxies=proxy), max_connections=6) as (
        port,
        guard,
    ):
        # Every client behind the proxy comes from its address: the proxy holds more than 2.
        held = [await busy(port, "127.0.0.5") for _ in range(5)]
        await box.until_waiting(5)
        # Not a proxy: its third connection is refused.
        held += [await busy(port, "127.0.0.6")]
        await box.until_waiting(6)
        reader, writer = await connect(port, "127.0.0.7")
        line = await answer_of(reader)
        assert line.startswith(b"HTTP/1.1 503"), line
        writer.close()
        assert guard.counts["refused-server"] == 1
        box.release.set()
        for reader, writer in held:
            assert (await answer_of(reader)).startswith(b"HTTP/1.1 200")
            writer.close()


async def test_a_body_sent_a_byte_a_second_is_cut_and_a_fast_upload_is_not() -> None:
    box = Box()
    limits = Limits(body_timeout_s=1.0, min_body_rate=1024, header_timeout_s=2.0)
    async with guarded(box, limits) as (port, guard):
        reader, writer = await connect(port, "127.0.0.2")
        writer.write(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        t0 = time.monotonic()
        answer = b""
        for _ in range(10):
            writer.write(b"x")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    # The whole answer at once: a byte written after the close resets the connection.
                    answer = await reader.read(4096)
                    break
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"at 1024 bytes a second at least" in answer
        assert time.monotonic() - t0 < 4
        writer.close()
        assert guard.counts["body-slow"] == 1 and box.uploaded == []
        # 8 MiB at loopback speed, in 64 KiB writes: passes.
        reader, writer = await connect(port, "127.0.0.2")
        size = 8 << 20
        writer.write(f"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode())
        chunk = b"y" * (1 << 16)
        for _ in range(size // len(chunk)):
            writer.write(chunk)
            await writer.drain()
        line = await answer_of(reader, 30)
        assert line.startswith(b"HTTP/1.1 200"), line
        assert box.uploaded == [size]
        writer.close()


async def test_headers_time_out_but_an_event_stream_and_a_kept_alive_connection_in_use_do_not() -> None:
    box = Box()
    limits = Limits(header_timeout_s=0.5, idle_timeout_s=0.6, body_timeout_s=0.5)
    async with guarded(box, limits) as (port, guard):
        # Headers a byte at a time: 408 after half a second, though a byte arrives every 0.1 s.
        reader, writer = await connect(port, "127.0.0.2")
        line = b""
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 100:
            writer.write(bytes([byte]))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):
                    line = await reader.read(4096)  # all at once (see the body's test)
                    break
        assert line.startswith(b"HTTP/1.1 408"), line
        assert b"must arrive within 0.5 s" in line
        writer.close()
        assert guard.counts["header-timeout"] == 1
        # An event stream of 3 s, longer than every timeout: all of it arrives.
        reader, writer = await connect(port, "127.0.0.3")
        writer.write(b"GET /stream?n=10 HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(10):
            data = await reader.read()  # until the server closes: the stream's end, then the idle timeout
        assert data.count(b"data: ") == 10, data[-200:]
        writer.close()
        # Kept alive: a second request after a pause under the idle timeout is answered.
        reader, writer = await connect(port, "127.0.0.4")
        for _ in range(3):
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            async with asyncio.timeout(5):
                head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200") and await reader.readexactly(5) == b"hello"
            await asyncio.sleep(0.4)
        # Idle past the idle timeout: closed.
        assert await closed(reader, 5)
        writer.close()
        assert guard.counts["header-timeout"] == 1 and guard.counts["body-slow"] == 0


def test_repeated_log_lines_are_suppressed_and_counted() -> None:
    now = [100.0]
    repeat = RepeatFilter(burst=3, interval_s=10, total=50, clock=lambda: now[0])
    log = logging.getLogger("referee.test.repeat")

    def record(msg: str, *args: Any, name: str = "aiohttp.server") -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)

    passed = [repeat.filter(record("Error handling request from %s", f"10.0.0.{i}")) for i in range(10)]
    assert passed == [True] * 3 + [False] * 7
    # Another template, another logger: their own allowance.
    assert repeat.filter(record("socket.accept() out of system resource", name="asyncio"))
    assert repeat.filter(record("Error handling request from %s", "x", name="referee.web"))
    now[0] += 11
    first = record("Error handling request from %s", "10.0.0.99")
    assert repeat.filter(first)
    assert (
        first.getMessage()
        == "Error handling request from 10.0.0.99 [and 7 similar messages suppressed before this one]"
    )
    # The total: at most 50 records of all kinds per interval.
    now[0] += 11
    assert sum(repeat.filter(record(f"distinct {i}")) for i in range(100)) == 50
    # flush() says what no later record said.
    now[0] += 11
    for _ in range(5):
        repeat.filter(record("flood"))
    now[0] += 11
    said: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, r: logging.LogRecord) -> None:
            said.append(r)

    keep = Keep()
    logging.getLogger("aiohttp.server").addHandler(keep)
    try:
        counts = repeat.flush()
    finally:
        logging.getLogger("aiohttp.server").removeHandler(keep)
    assert ("aiohttp.server", logging.ERROR, "flood", 2) in counts
    assert any(r.getMessage() == "2 similar messages suppressed in 10 s: flood" for r in said)
    assert repeat.filter(said[0])  # a summary is never suppressed itself
    del log


def test_serve_raises_its_soft_file_limit_to_the_hard_one() -> None:
    code = (
        "import resource; from referee.web.server import raise_file_limit; "
        "print(*raise_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 1024))

    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
        capture_output=True,
        text=True,
        preexec_fn=low,
        timeout=60,
    ).stdout.split()
    assert out == ["256", "1024", "1024"]


def test_serve_passes_its_connection_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, Any]] = []
    monkeypatch.setattr(web_server, "run", lambda app, **kw: started.append(kw))
    r = CliRunner().invoke(
        serve,
        [
            "--db",
            str(tmp_path / "s.sqlite"),
            "--port",
            "0",
            "--header-timeout",
            "3",
            "--body-timeout",
            "4",
            "--min-body-rate",
            "2k",
            "--idle-timeout",
            "5",
            "--max-conns-per-client",
            "7",
            "--max-connections",
            "99",
            "--trusted-proxies",
            "10.1.0.0/16",
        ],
    )
    assert r.exit_code == 0, r.output
    limits = started[0]["limits"]
    assert limits == Limits(
        header_timeout_s=3,
        body_timeout_s=4,
        min_body_rate=2048,
        idle_timeout_s=5,
        max_per_client=7,
        max_connections=99,
        trusted_proxies=(ipaddress.ip_network("10.1.0.0/16"),),
    )
    assert "connections: at most 99 in all, 7 per client" in r.output
    r = CliRunner().invoke(serve, ["--db", str(tmp_path / "s.sqlite"), "--min-body-rate", "fast"])
    assert r.exit_code == 2 and "--min-body-rate" in r.output
