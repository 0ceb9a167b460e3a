"""Fixtures of the match runner's tests: bots on loopback, a client session."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zoo import good_app, recording  # noqa: E402

from referee.bots import make_session  # noqa: E402


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
