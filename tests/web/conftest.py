"""Fixtures of the service's tests: a service database with its admin
token, a test client on it, sample bots on loopback; Playwright pointed at
Debian's Chromium."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from referee.service.store import ServiceDB
from referee.web import Settings, make_app
from tests.support.browser import EXPECT_MS, docker_or_skip
from tests.support.programs.zoo import zoo_app
from tests.support.web import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    LOOPBACK,
    Background,
    expect_waits,
    league_text,
    new_admin_token,
    sample_bot_app,
    serve,
)


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


@pytest.fixture
def site(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The service on loopback with one competition: team "ada" (no bot yet)
    and team "bea", whose accepted bot (a URL on loopback, admitted earlier)
    has since gone wrong: it answers every /act with an illegal move. A house
    bot (greedy) plays too."""
    docker = docker_or_skip()
    bg = Background()
    try:
        house = bg.serve(lambda: sample_bot_app("greedy"))
        bad = bg.serve(lambda: zoo_app("illegal", after=2, name="bea-bot"))
        illegal = bg.serve(lambda: zoo_app("illegal", name="ada-v3"))
        db_path = tmp_path / "service.sqlite"
        admin = new_admin_token(db_path)
        db = ServiceDB(db_path)
        try:
            comp = db.add_competition(
                "Class", league_text(name="class", rounds=1, concurrency=2, house={"house-greedy": house})
            )
            ada, ada_token = db.add_team(comp.id, "ada")
            bea, bea_token = db.add_team(comp.id, "bea")
            db.add_submission(
                bea.id,
                kind="url",
                url=bad,
                image=None,
                secret=None,
                note="admitted earlier",
                status="accepted",
            )
        finally:
            db.close()
        base = bg.serve(
            lambda: make_app(db_path, Settings(poll_s=0.05, bot_policy=LOOPBACK, validation_games=2))
        )
        yield {
            "base": base,
            "admin": admin,
            "cid": comp.id,
            "ada": ada_token,
            "bea": bea_token,
            "illegal_url": illegal,
            "docker": docker,
            "tmp": tmp_path,
        }
    finally:
        bg.close()
        from tests.support.browser import remove_team_images

        remove_team_images(tmp_path / "service.sqlite")  # the images of this test's service instance


@pytest.fixture
def patient_expect() -> Iterator[None]:
    """expect() waits EXPECT_MS for this test."""
    with expect_waits(EXPECT_MS):
        yield
