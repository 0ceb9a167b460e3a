"""Fixtures of the match runner's tests: bots on loopback, a client session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping

import aiohttp
import pytest
from aiohttp import web

from referee.bots import make_session
from tests.support.clocks import VirtualTimeLoop
from tests.support.programs.zoo import good_app, recording

#: The modules whose tests run on a loop of virtual time (VirtualTimeLoop):
#: their deadlines are the subject, and every party lives on the test's loop.
VIRTUAL_TIME = frozenset({"test_match_zoo.py"})


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """pytest-asyncio's loop for each test of this folder: virtual time for
    the modules of VIRTUAL_TIME, asyncio's own loop for the others."""
    if item.path.name in VIRTUAL_TIME:
        return {"virtual_time": VirtualTimeLoop}
    return {"asyncio": asyncio.new_event_loop}


def sample_app(kind: str = "random", secret: str | None = None) -> web.Application:
    """A sample bot's app (random or greedy) that records what it receives; the
    zoo's random bot when sample_bots is not there."""
    try:
        from sample_bots import greedy
        from sample_bots import random as sample_random
        from sample_bots.sdk import make_app
    except ImportError:  # pragma: no cover - sample_bots is written in parallel
        return good_app(kind)
    if kind == "greedy":
        return recording(make_app(greedy.decide, greedy.INFO, secret=secret))
    bot = sample_random.RandomBot(seed=7)
    return recording(make_app(bot.decide, sample_random.INFO, secret=secret, on_end=bot.on_end))


@pytest.fixture
def make_sample() -> Callable[..., web.Application]:
    return sample_app


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    s = make_session()
    yield s
    await s.close()
