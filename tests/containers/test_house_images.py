"""The built-in house bots as images the service builds itself at start
(issue 34, item 1): from its own base image, tagged with its instance, no
registry; a practice game then plays the house bot as its image."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from referee.bots.netpolicy import AddressPolicy, parse_networks
from referee.service.classroom import Classroom
from referee.service.default_league import DEFAULT_LEAGUE
from referee.service.hosts import InlineHost
from referee.service.practice import in_process, practice_league
from referee.service.settings import Settings
from referee.service.store.practice import get_game
from sample_bots import greedy
from sample_bots.sdk import make_app
from tests.support.clocks import SteppedClock
from tests.support.containers import FIGURES, remove_instance_images

pytestmark = pytest.mark.timeout(600)


@pytest.mark.slow
async def test_the_service_builds_its_house_bots_images_at_start_and_plays_them(
    tmp_path: Path, docker_client: Any
) -> None:
    runner = web.AppRunner(make_app(greedy.decide, greedy.INFO), access_log=None, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    settings = Settings(
        bot_policy=AddressPolicy(allowed=parse_networks("127.0.0.0/8")),
        validation_games=2,
        house_images=True,
    )
    room = Classroom(
        tmp_path / "service.sqlite",
        settings,
        clock=SteppedClock(wall=time.time(), workers=2),
        hosts=InlineHost,
        practice_runner=in_process,
    )
    t0 = time.perf_counter()
    await room.start()
    try:

        async def built() -> bool:
            return len(room.house_images) == 3

        async with asyncio.timeout(540):  # a first build makes the base image too
            await room.until(built)
        FIGURES["built-in house bots' images ready at start"] = f"{time.perf_counter() - t0:.1f} s"
        instance = room.pipeline.instance
        for builtin, image_id in room.house_images.items():
            image = docker_client.images.get(image_id)
            assert instance.bot_tag(builtin) in image.tags, (builtin, image.tags)

        comp = await room.create_competition(
            "duels", DEFAULT_LEAGUE.replace("table_size = 4", "table_size = 2")
        )
        team, _token = await room.add_team(comp.id, "ada")
        sub = await room.submit(team, kind="url", url=url)
        verdict = await room.pipeline.wait_for(sub.id)
        assert verdict.status == "accepted", verdict.reason
        game = await room.ask_practice(team, ["house:house-greedy"])
        league = await room.db.call(practice_league, game, settings.bot_policy, {}, room.house_images)
        assert league.bots[1].image == room.house_images["greedy"] and league.bots[1].command is None

        async def ended() -> bool:
            g = await room.db.call(get_game, game.id)
            return g is not None and g.status in ("finished", "failed")

        async with asyncio.timeout(120):
            await room.until(ended)
        done = await room.db.call(get_game, game.id)
        assert done is not None and done.status == "finished", done
    finally:
        instance = room.pipeline.instance
        await room.stop()
        await runner.cleanup()
        remove_instance_images(docker_client, instance)
