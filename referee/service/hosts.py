"""Where the service's long work runs (issue 33): a run, a ladder, a final.

A :class:`Host` runs one piece of work (a coroutine function) and lets the
service's loop reach into it: call a function on the work's loop, run a
coroutine there and await its result, wait for the work to end.

- :class:`ThreadHost` (the real service's): a thread with an event loop of
  its own, so a ladder's games never hold up the pages (and the runner's
  signal handlers, which only the main thread may install, are left to the
  service).
- :class:`InlineHost`: a task on the service's own loop. A test (the
  simulated semester of ``tests/service``) passes it, so everything the
  service does happens on one loop it can see, step by step.

The :class:`~referee.service.classroom.Classroom` is given the kind of
host to make (``hosts=``), and every run and ladder gets one from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

#: The work a host runs: a coroutine function, and what is done after it (on
#: the host's side, with its loop closed: e.g. recording the run's end).
Main = Callable[[], Coroutine[Any, Any, None]]


class Host(Protocol):
    def start(self, main: Main, after: Callable[[], None] | None = None) -> None:
        """Run `main`, then `after` (both however it ends)."""
        ...

    def call_soon(self, fn: Callable[[], None]) -> None:
        """`fn` called on the work's loop (nothing when the work has ended)."""
        ...

    async def run(self, coro: Callable[[], Coroutine[Any, Any, T]]) -> T | None:
        """`coro()` run on the work's loop, awaited from the caller's (None: the work has ended)."""
        ...

    def alive(self) -> bool: ...

    async def join(self, timeout: float | None = None) -> None:
        """Wait for the work to end (at most `timeout` seconds)."""
        ...


class ThreadHost:
    """The work in a thread with its own event loop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self, main: Main, after: Callable[[], None] | None = None) -> None:
        def body() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            self._ready.set()
            try:
                loop.run_until_complete(main())
            finally:
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()
                    if after is not None:
                        after()

        self._thread = threading.Thread(target=body, name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def call_soon(self, fn: Callable[[], None]) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(fn)

    async def run(self, coro: Callable[[], Coroutine[Any, Any, T]]) -> T | None:
        loop = self.loop
        if loop is None or loop.is_closed() or not self.alive():
            return None
        try:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro(), loop))
        except RuntimeError:  # the loop closed meanwhile
            return None

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, timeout)


class InlineHost:
    """The work as a task on the caller's loop (a test's: nothing it cannot see)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[None] | None = None

    def start(self, main: Main, after: Callable[[], None] | None = None) -> None:
        async def body() -> None:
            try:
                await main()
            finally:
                if after is not None:
                    after()

        self._task = asyncio.get_running_loop().create_task(body(), name=self.name)

    def call_soon(self, fn: Callable[[], None]) -> None:
        if self.alive():
            asyncio.get_running_loop().call_soon(fn)

    async def run(self, coro: Callable[[], Coroutine[Any, Any, T]]) -> T | None:
        if not self.alive():
            return None
        return await coro()

    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def join(self, timeout: float | None = None) -> None:
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._task), timeout)


#: What the classroom makes a host with (given the work's name).
HostMaker = Callable[[str], Host]
