"""The guard on a container bot's socket: every connection the referee makes
opens the socket with ``O_PATH|O_NOFOLLOW``, checks that what it got is a
socket owned by the bot's uid (not a symbolic link, a FIFO or a file the bot
put there to redirect the referee, e.g. to the Docker daemon's socket), and
connects through ``/proc/self/fd/N``, i.e. to that very inode: a swap between
the check and the connection is not followed. A refusal is a ``connection``
fault saying what was found (:class:`SocketRefused`).

:class:`GuardedHttpBot` is the :class:`~referee.bots.http.HttpBot` a
:class:`~referee.bots.sandbox.container.ContainerBot` talks through.
"""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Any, Final

import aiohttp
from aiohttp.client_exceptions import UnixClientConnectorError
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import ceil_timeout
from aiohttp.tracing import Trace

from ..http import HttpBot, _user_agent

__all__ = ["GuardedConnector", "GuardedHttpBot", "SocketGuard", "SocketRefused"]


class SocketRefused(aiohttp.ClientConnectionError):
    """What is at a bot's socket path is not a socket the referee will talk to."""


_WHAT: Final = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFREG: "a regular file",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFDIR: "a folder",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}
#: Connect through the O_PATH descriptor (Linux): the kernel connects to the
#: inode that was checked, whatever is at the path by then.
_BY_FD: Final = hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")


class SocketGuard:
    """Checks a bot's socket before each connection: `path` must be a socket
    (not a symbolic link, not a FIFO or a file), owned by `uid` when given.

    :meth:`open` gives a descriptor of it (``O_PATH|O_NOFOLLOW``: never
    followed, never opened for I/O, so a FIFO cannot block) and
    :meth:`address` the path that connects to exactly that inode
    (``/proc/self/fd/N``), so a bot that swaps its socket after the check
    is not followed either. One ``open`` + ``fstat`` + ``close``: a few µs,
    paid per new connection (kept-alive ones are reused)."""

    def __init__(self, path: str | os.PathLike[str], uid: int | None = None) -> None:
        self.path = os.fspath(path)
        self.uid = uid

    def refusal(self, st: os.stat_result) -> str | None:
        """Why the file `st` describes is refused (None: it is fine)."""
        kind = stat.S_IFMT(st.st_mode)
        if kind != stat.S_IFSOCK:
            what = _WHAT.get(kind, f"a file of type {kind:o}")
            return f"the bot's socket was replaced by {what}: refused"
        if self.uid is not None and st.st_uid != self.uid:
            return f"the bot's socket belongs to uid {st.st_uid}, not to the bot's uid {self.uid}: refused"
        return None

    def check(self) -> str | None:
        """Why what is at the path now is refused; None when it is fine or absent."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return None
        return self.refusal(st)

    def open(self) -> int:
        """A descriptor of the checked socket (close it after connecting).

        Raises :class:`SocketRefused`, or ``OSError`` (``FileNotFoundError``
        before the bot listens)."""
        if not _BY_FD:  # no O_PATH: check, then connect by path (a window remains)
            why = self.refusal(os.lstat(self.path))
            if why is not None:
                raise SocketRefused(why)
            return -1
        fd = os.open(self.path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            why = self.refusal(os.fstat(fd))
        except BaseException:
            os.close(fd)
            raise
        if why is not None:
            os.close(fd)
            raise SocketRefused(why)
        return fd

    def address(self, fd: int) -> str:
        """Where to connect to reach the socket `fd` (from :meth:`open`) is."""
        return f"/proc/self/fd/{fd}" if fd >= 0 else self.path

    @staticmethod
    def release(fd: int) -> None:
        if fd >= 0:
            os.close(fd)


class GuardedConnector(aiohttp.UnixConnector):
    """A unix connector whose every connection goes through a :class:`SocketGuard`."""

    def __init__(self, guard: SocketGuard, limit: int) -> None:
        super().__init__(path=guard.path, limit=limit)
        self.guard = guard

    async def _create_connection(
        self, req: aiohttp.ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> ResponseHandler:
        try:
            fd = self.guard.open()
        except SocketRefused:
            raise
        except OSError as exc:
            raise UnixClientConnectorError(self.path, req.connection_key, exc) from exc
        try:
            async with ceil_timeout(timeout.sock_connect, ceil_threshold=timeout.ceil_threshold):
                _, proto = await self._loop.create_unix_connection(self._factory, self.guard.address(fd))
        except OSError as exc:
            if exc.errno is None and isinstance(exc, asyncio.TimeoutError):
                raise
            raise UnixClientConnectorError(self.path, req.connection_key, exc) from exc
        finally:
            self.guard.release(fd)
        return proto


class GuardedHttpBot(HttpBot):
    """An :class:`HttpBot` on a unix socket whose connections are guarded."""

    def __init__(self, guard: SocketGuard, **kwargs: Any) -> None:
        super().__init__(f"unix:{guard.path}", **kwargs)
        self.guard = guard

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # make_session(unix_socket=...) with the guarded connector
            self._session = aiohttp.ClientSession(
                connector=GuardedConnector(self.guard, self.connections),
                timeout=aiohttp.ClientTimeout(),
                auto_decompress=False,
                trust_env=False,
                headers={"Accept-Encoding": "identity", "User-Agent": _user_agent()},
            )
        return self._session
