"""Fixtures of the service's tests: a service database with its admin
token, a test client on it, sample bots on loopback; Playwright pointed at
Debian's Chromium."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers_web import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_FLAGS,
    LOOPBACK,
    new_admin_token,
    sample_bot_app,
    serve,
)

from referee.web import Settings, make_app  # noqa: E402


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "service.sqlite"


@pytest.fixture
def admin_token(db_path: Path) -> str:
    return new_admin_token(db_path)


Client = TestClient[web.Request, web.Application]


@pytest.fixture
def service(
    aiohttp_client: Callable[..., Awaitable[Client]], db_path: Path, admin_token: str
) -> Callable[..., Awaitable[Client]]:
    """``await service(**settings)``: a test client of a new app on the database."""

    async def make(**settings: Any) -> Client:
        # Live updates as fast as the short games come (the rate cap has its own tests).
        quick = {"poll_s": 0.05, "min_update_s": 0.05, "bot_policy": LOOPBACK}
        return await aiohttp_client(make_app(db_path, Settings(**{**quick, **settings})))

    return make


@pytest.fixture
async def bot_urls() -> AsyncIterator[dict[str, str]]:
    """Sample bots served on loopback: greedy, random, and greedy with a secret."""
    runners = []
    urls = {}
    for name, kind, secret in (
        ("greedy", "greedy", None),
        ("random", "random", None),
        ("signed", "greedy", "s3cret"),
    ):
        runner, url = await serve(sample_bot_app(kind, secret))
        runners.append(runner)
        urls[name] = url
    yield urls
    for r in runners:
        await r.cleanup()


# ---------------------------------------------------------------- Playwright


def chromium_or_skip() -> None:
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} is missing: apt-get install -y chromium (browser tests need Debian's Chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        print(f"\nSKIP browser tests: {message}")
        pytest.skip(message)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    chromium_or_skip()
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [*browser_type_launch_args.get("args", []), *CHROMIUM_FLAGS],
    }
