"""Helpers of the service's tests: league texts, sample bots and the service
on loopback in a thread of their own (for the CLI and browser tests), and
what the browser tests share (Debian's Chromium, Playwright's waits)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from referee.bots.netpolicy import AddressPolicy, parse_networks

#: The checkout whose code the child processes import.
ROOT = Path(__file__).resolve().parents[2]
#: The tests' bots run on loopback: the admin allows it (referee serve --bot-networks 127.0.0.0/8).
LOOPBACK = AddressPolicy(allowed=parse_networks("127.0.0.0/8"))
#: The browser tests' Chromium (Debian's), and the flags it is launched with.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def league_text(
    *,
    name: str = "class",
    table_size: int = 2,
    rounds: int = 1,
    house: dict[str, str] | None = None,
    concurrency: int = 4,
) -> str:
    lines = [
        "[tournament]",
        f'name = "{name}"',
        "seed = 5",
        f"table_size = {table_size}",
        f"rounds = {rounds}",
        f"concurrency = {concurrency}",
        "",
        "[timeouts]",
        "move_ms = 2000",
        "",
    ]
    for bot, url in (house or {}).items():
        lines += ["[[bots]]", f'name = "{bot}"', f'url = "{url}"', ""]
    return "\n".join(lines)


def sample_bot_app(kind: str, secret: str | None = None) -> web.Application:
    from sample_bots import greedy
    from sample_bots import random as sample_random
    from sample_bots.sdk import make_app

    if kind == "greedy":
        return make_app(greedy.decide, greedy.INFO, secret=secret)
    bot = sample_random.RandomBot(seed=7)
    return make_app(bot.decide, sample_random.INFO, secret=secret, on_end=bot.on_end)


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on a free loopback port: its runner and base URL."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    (address,) = runner.addresses  # the one socket it listens on: (host, port)
    return runner, f"http://127.0.0.1:{address[1]}"


class Background:
    """An event loop in a thread serving aiohttp apps (sample bots, the
    service) for synchronous tests (CLI, browser)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[web.AppRunner] = []

    def call(self, coro_fn: Callable[[], Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro_fn(), self.loop).result(timeout)

    def serve(self, make: Callable[[], web.Application]) -> str:
        async def go() -> str:
            runner, url = await serve(make())
            self.runners.append(runner)
            return url

        return str(self.call(go))

    def serve_bots(self, kinds: dict[str, str]) -> dict[str, str]:
        """Sample bots ({name: kind}, a kind of :func:`sample_bot_app`) served: {name: URL}."""
        return {name: self.serve(functools.partial(sample_bot_app, kind)) for name, kind in kinds.items()}

    def close(self) -> None:
        async def stop() -> None:
            for r in reversed(self.runners):
                await r.cleanup()

        try:
            self.call(stop, timeout=60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@contextlib.contextmanager
def expect_waits(ms: int) -> Iterator[None]:
    """Playwright's expect() waits `ms` inside (a global of Playwright's: put
    back to its default, 5 s, after)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=ms)
    try:
        yield
    finally:
        expect.set_options(timeout=None)


def referee_cli(*args: str) -> list[str]:
    """The command line of ``referee ARGS`` run by this Python (for a subprocess)."""
    return [sys.executable, "-c", "from referee.cli import main; main()", *args]


class Served:
    """``referee serve ARGS`` in a child process of this loop: its stderr
    copied line by line into `log` (a pipe always read, so the child never
    blocks on it), and its ready line (:data:`referee.cli.serve.LISTENING`,
    said once it listens) awaited, never its port polled."""

    def __init__(self, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.proc = proc
        self.log = log
        self._line: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._copier = asyncio.create_task(self._copy())

    @classmethod
    async def start(cls, log: Path, *args: str, preexec_fn: Callable[[], Any] | None = None) -> Served:
        """``referee serve ARGS`` started (it imports this tree: ``PYTHONPATH``)."""
        proc = await asyncio.create_subprocess_exec(
            *referee_cli("serve", *args),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=preexec_fn,
            limit=1 << 20,
        )
        return cls(proc, log)

    async def _copy(self) -> None:
        from referee.cli.serve import LISTENING

        stderr = self.proc.stderr
        assert stderr is not None
        with self.log.open("wb") as out:
            while line := await stderr.readline():
                out.write(line)
                out.flush()
                if not self._line.done() and line.startswith(LISTENING.encode()):
                    self._line.set_result(line.decode().strip())
        if not self._line.done():
            self._line.set_exception(
                AssertionError(f"referee serve ended before it listened: {self.log.read_text()[-3000:]}")
            )

    async def ready(self, within_s: float = 60) -> int:
        """The port it listens on, once it says so (`within_s` bounds a broken test only)."""
        try:
            async with asyncio.timeout(within_s):
                line = await asyncio.shield(self._line)
        except TimeoutError:
            raise AssertionError(
                f"referee serve did not listen within {within_s:g} s: {self.log.read_text()[-3000:]}"
            ) from None
        return int(line.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])

    async def close(self) -> None:
        """Stop it (SIGTERM, then SIGKILL), its stderr copied to the end."""
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                async with asyncio.timeout(15):
                    await self.proc.wait()
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        await self._copier


def wait_for_http(
    proc: subprocess.Popen[bytes],
    url: str,
    log: Path,
    *,
    what: str,
    within_s: float,
    request_timeout_s: float = 2.0,
    pause_s: float = 0.2,
) -> None:
    """Wait until ``GET url`` answers 200 from `proc` (`what`, its output in
    `log`); fails, with the end of that log, when `proc` ends first or
    `within_s` pass."""
    deadline = time.monotonic() + within_s
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(url, timeout=request_timeout_s) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, (
            f"{what} did not answer within {within_s:g} s: {log.read_text()[-3000:]}"
        )
        time.sleep(pause_s)


def db_file(tmp: Path) -> Path:
    return tmp / "service.sqlite"


def new_admin_token(db_path: Path) -> str:
    """The admin token of a new service database at `db_path` (made there)."""
    from referee.service.store import ServiceDB

    db = ServiceDB(db_path)
    try:
        token = db.ensure_admin_token()
    finally:
        db.close()
    assert token is not None, f"{db_path} has an admin token already"
    return token


def turncoat_app(state: dict[str, bool]) -> web.Application:
    """A bot that plays the first legal action until ``state["bad"]``, then an
    index out of range: admitted, and faulting in the ladder afterwards."""

    async def info(request: web.Request) -> web.Response:
        return web.json_response({"name": "turncoat", "version": "1", "author": "t", "apiversion": "1"})

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({})

    async def act(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"request_id": body["request_id"], "index": 999 if state["bad"] else 0})

    app = web.Application()
    app.router.add_get("/", info)
    app.router.add_post("/start", ok)
    app.router.add_post("/act", act)
    app.router.add_post("/end", ok)
    return app
