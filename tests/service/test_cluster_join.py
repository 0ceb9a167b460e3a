"""Joining the cluster never holds the service: an address where nothing
answers is said at once with what to do (Ray itself retries such an address
for minutes), and a join that hangs all the same leaves the service's stop
free to finish (``referee serve --executor ray --registry R`` joins at start)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

import pytest

from referee.service.check_site import _in_daemon_thread
from referee.tournament.executors import ExecutorError

pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the block ends: nothing listens there


def test_an_address_where_nothing_answers_is_refused_at_once_with_what_to_do() -> None:
    from referee.tournament.executors import RayExecutor

    port = _closed_port()
    with pytest.raises(ExecutorError) as err:
        RayExecutor(address=f"127.0.0.1:{port}", workers=0)
    text = str(err.value)
    assert f"nothing answers at the Ray cluster's address 127.0.0.1:{port}" in text
    assert f"ray start --head --port {port}" in text and "--address" in text


def test_a_join_that_hangs_leaves_the_stop_free_to_finish() -> None:
    gate = threading.Event()  # never set while the loop runs: a join that hangs
    started = threading.Event()

    def join() -> str:
        started.set()
        gate.wait()
        return "joined"

    async def service() -> None:
        task = asyncio.create_task(_in_daemon_thread(join))
        await asyncio.to_thread(started.wait)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    # asyncio.run ends by waiting for the loop's thread pool: a join there would hold it forever
    asyncio.run(service())
    gate.set()


async def test_a_join_gives_its_result_or_its_error() -> None:
    assert await _in_daemon_thread(lambda: 42) == 42

    def fails() -> int:
        raise ExecutorError("no cluster")

    with pytest.raises(ExecutorError, match="no cluster"):
        await _in_daemon_thread(fails)
