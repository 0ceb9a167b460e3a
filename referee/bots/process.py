"""A bot run as a local process: ``python -m sample_bots.random --port {port}``.

:class:`CommandBot` picks a free loopback port, puts it in place of ``{port}``
in the command (and in the ``PORT`` environment variable), starts the process
in a process group of its own with stdout and stderr going to log files, and
waits until ``GET /`` answers. It then speaks HTTP through an
:class:`~referee.bots.http.HttpBot`. A bot whose process died is started
again before its next game; :meth:`CommandBot.stop` sends SIGTERM to the
whole group, then SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Final, cast

import aiohttp

from protocol.messages import BotInfo, Fault, GameStart

from .base import ActOutcome, BotError
from .http import DEFAULT_MAX_BODY, HttpBot
from .managed import ACT_MARK, GAME_MARK, ManagedBot

__all__ = ["CommandBot", "free_port"]

#: Bytes of the end of a bot's stderr quoted in an error.
STDERR_TAIL: Final = 2000

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _guess_label(command: Sequence[str]) -> str:
    """A file name for a command's logs: the module after -m, else the script, else the program."""
    if "-m" in command[:-1]:
        return command[command.index("-m") + 1]
    for part in command[1:]:
        if part.endswith((".py", ".js", ".jar")):
            return Path(part).stem
    return Path(command[0]).name


#: Log labels taken in this process, by folder: two bots never share a log file.
_LABELS: dict[Path, set[str]] = {}


def _claim_label(log_dir: Path, wanted: str) -> str:
    base = _UNSAFE.sub("_", wanted).strip("_.")[:40] or "bot"
    taken = _LABELS.setdefault(log_dir.resolve(), set())
    label = base
    k = 1
    while label in taken:
        k += 1
        label = f"{base}-{k}"
    taken.add(label)
    return label


def pid_alive(pid: int | None) -> bool:
    """Whether process `pid` runs on this machine (another user's counts)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tail_of(path: Path, size: int = STDERR_TAIL) -> str:
    """The last whole lines of a log file within its last `size` bytes, as
    text (empty if unreadable): a line cut by the window is left out, so
    the tail never starts with a fragment (of a bot's line, or of a marker
    line that would then escape being recognised)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            start = max(0, end - size)
            f.seek(max(0, start - 1))  # the byte before the window: a line starts there or not
            data = f.read()
    except OSError:
        return ""
    if start > 0:
        first, nl, rest = data.partition(b"\n")
        data = rest if nl and len(first) > 0 else data[1:]
    return data.decode("utf-8", "replace").strip()


def last_lines(text: str, cap: int) -> str:
    """The last whole lines of `text` within `cap` characters (a line longer than `cap`: its end)."""
    if len(text) <= cap:
        return text
    tail = text[-cap:]
    cut = tail.find("\n")
    return tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail


def _load_prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return cast(Callable[[int, int], int], libc.prctl)
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: be killed when the referee dies, even by
    SIGKILL, so no bot process outlives a crashed referee (Linux only)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


#: Program names that mean the referee's own interpreter.
_OWN_PYTHON: Final = frozenset({"python", "python3"})


class CommandBot(ManagedBot):
    """A bot started from `command` (a list; ``{port}`` is replaced by the port).

    ``python`` or ``python3`` as the program is the referee's own interpreter
    (the one with this project and its SDK installed), wherever the command
    comes from; any other program is looked up on ``PATH`` as usual.

    `log_dir` receives ``<label>.stdout.log`` and ``<label>.stderr.log``
    (appended to across restarts, each start marked by a ``--- <time> start``
    line). The label is `name` (bots given the same name share the files),
    else the module run with ``-m`` or the script, made unique among this
    process's bots. `ready_timeout_s` bounds the wait for the
    first answer to ``GET /``; `stop_grace_s` the wait between SIGTERM and
    SIGKILL. `env` holds extra environment variables (on top of the
    referee's; ``PORT`` is set too); `cwd` is the working directory.
    `session`, `secret`, `max_body` are passed to the
    :class:`HttpBot`. Use ``async with CommandBot(...) as bot`` or call
    :meth:`launch` and :meth:`stop` yourself.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        log_dir: str | os.PathLike[str],
        name: str | None = None,
        secret: str | bytes | None = None,
        session: aiohttp.ClientSession | None = None,
        host: str = "127.0.0.1",
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        ready_timeout_s: float = 10.0,
        stop_grace_s: float = 2.0,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        if not command:
            raise ValueError("a command bot needs a command")
        self.command = list(command)
        if self.command[0] in _OWN_PYTHON:
            self.command[0] = sys.executable
        self.log_dir = Path(log_dir)
        self.secret = secret
        self.host = host
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.max_body = max_body
        #: How many times the process was started.
        self.launches = 0
        #: The port of the running process.
        self.port: int | None = None
        super().__init__(name)
        self._session = session
        self._label = (
            _UNSAFE.sub("_", name).strip("_.")[:60] or "bot"
            if name
            else _claim_label(self.log_dir, _guess_label(self.command))
        )
        self._process: asyncio.subprocess.Process | None = None
        self._logs: list[IO[bytes]] = []

    # ---------------------------------------------------------------- basics

    def _fallback_name(self) -> str:
        return " ".join(self.command)

    @property
    def stdout_path(self) -> Path:
        return self.log_dir / f"{self._label}.stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.log_dir / f"{self._label}.stderr.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def exited(self) -> int | None:
        """Wait until the bot's process exits (by itself or killed) and is
        reaped: its exit code (``-N``: killed by signal N); None if none runs."""
        process = self._process
        return None if process is None else await process.wait()

    @property
    def url(self) -> str | None:
        return self._http.url if self._http is not None else None

    def __repr__(self) -> str:
        return f"CommandBot({self.command!r}, port={self.port})"

    # ------------------------------------------------------------ its marks

    def _mark(self, text: str) -> None:
        """A line of the referee's in the bot's stdout log, between the bot's
        own (the file is shared, appended to: it lands after everything the
        bot wrote before, so a bot that flushes its output is split exactly)."""
        if self._logs:
            with contextlib.suppress(OSError, ValueError):
                os.write(self._logs[0].fileno(), text.encode())

    async def start(self, message: GameStart, timeout_s: float) -> Fault | None:
        """``POST /start``, after a line ``--- game <game_id>`` in its stdout log."""
        self._mark(f"{GAME_MARK}{message.game_id}\n")
        return await super().start(message, timeout_s)

    async def act_bytes(self, body: bytes, request_id: str, turn: int, deadline_s: float) -> ActOutcome:
        """``POST /act``, after a line ``--- act <request id> <turn>`` in its stdout log."""
        self._mark(f"{ACT_MARK}{request_id} {turn}\n")
        return await super().act_bytes(body, request_id, turn, deadline_s)

    # --------------------------------------------------------------- process

    async def _launch(self) -> BotInfo:
        await self._stop()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        port = free_port(self.host)
        argv = [part.replace("{port}", str(port)) for part in self.command]
        env = {**os.environ, **(self.env or {}), "PORT": str(port)}
        stdout = self.stdout_path.open("ab")
        stderr = self.stderr_path.open("ab")
        self._logs = [stdout, stderr]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        for log in self._logs:
            log.write(f"--- {stamp} start on port {port}: {argv!r}\n".encode())
            log.flush()
        try:
            self._process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as e:
            self._close_logs()
            raise BotError(f"cannot start {argv!r}: {e}") from None
        self.launches += 1
        self.port = port
        self._http = HttpBot(
            f"http://{self.host}:{port}",
            name=self._name,
            secret=self.secret,
            session=self._session,
            max_body=self.max_body,
        )
        try:
            self.info = await self._wait_ready()
        except BaseException:
            await self._stop()
            raise
        return self.info

    async def _wait_ready(self) -> BotInfo:
        return await self._poll_ready(
            self.ready_timeout_s,
            lambda last: f"on port {self.port} (last: {last}); does it listen on the port given as {{port}}?",
        )

    async def _died(self) -> str | None:
        assert self._process is not None
        code = self._process.returncode
        return None if code is None else f"exited with code {code}"

    async def _why(self, what: str) -> str:
        tail = tail_of(self.stderr_path)
        text = f"bot {' '.join(self.command)!r} {what}"
        if tail:
            text += f"\n--- end of its stderr ({self.stderr_path}):\n{tail}"
        else:
            text += f" (its stderr, {self.stderr_path}, is empty)"
        return text

    async def _stop(self) -> None:
        process = self._process
        http = self._http
        self._process = None
        self._http = None
        self.info = None
        if http is not None:
            await http.close()
        if process is not None:
            if process.returncode is None:
                self._signal(process.pid, signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), self.stop_grace_s)
                except TimeoutError:
                    self._signal(process.pid, signal.SIGKILL)
                    await process.wait()
            # Children left in the group once the leader is gone.
            self._signal(process.pid, signal.SIGKILL)
        self._close_logs()

    @staticmethod
    def _signal(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def _close_logs(self) -> None:
        for log in self._logs:
            log.close()
        self._logs = []

    def _attached(self) -> bool:
        return self.running
