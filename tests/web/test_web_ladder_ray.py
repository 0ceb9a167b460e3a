"""The ladder and the final on Ray workers (issue 15, "Scale"): ``referee
serve --executor ray`` plays through the executors of ``referee tournament``,
with the same final standings as this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.ladder import final_of

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

pytestmark = pytest.mark.slow


def url_teams(bot_urls: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {"ada": {"url": bot_urls["greedy"]}, "bo": {"url": bot_urls["signed"], "secret": "s3cret"}}


async def test_the_ladder_and_the_final_on_ray_give_the_standings_of_this_process(
    aiohttp_client: Any, tmp_path: Path, bot_urls: dict[str, str]
) -> None:
    from referee.service.runs import start_ray

    teams = url_teams(bot_urls)
    local = await final_of(aiohttp_client, tmp_path / "local.sqlite", bot_urls["greedy"], teams)
    start_ray(None)
    try:
        remote = await final_of(
            aiohttp_client, tmp_path / "ray.sqlite", bot_urls["greedy"], teams, executor="ray"
        )
    finally:
        ray.shutdown()
    assert remote.standings == local.standings
    assert {r["bot"] for r in local.standings} == {"house", "ada", "bo"}
