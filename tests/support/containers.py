"""What the container tests share: their figures and skips, the session's runtime, waiting for a
container's line, uploads waited for until settled, image clean-ups, a ladder competition."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

#: Measured figures, printed at the end of the run.
FIGURES: dict[str, str] = {}
#: Why the container tests were skipped (printed at the end of the run).
WHY_SKIPPED: list[str] = []
#: The runtime the session's containers run under (``REFEREE_TEST_RUNTIME``); None: the daemon's default.
TEST_RUNTIME = os.environ.get("REFEREE_TEST_RUNTIME", "").strip() or None


#: Whether that runtime is gVisor's runsc.
GVISOR = (TEST_RUNTIME or "").startswith("runsc")
#: How a connection to no route fails: ENETUNREACH on Linux; gVisor's own
#: network stack answers EHOSTUNREACH.
UNREACHABLE = ("ENETUNREACH", "EHOSTUNREACH") if GVISOR else ("ENETUNREACH",)


def skip_under_runtime(runtimes: dict[str, str]) -> None:
    """Skip the calling test when the session runs under one of `runtimes`
    ({runtime: why this test cannot hold under it}); the reason is printed."""
    why = runtimes.get(TEST_RUNTIME or "")
    if why is not None:
        pytest.skip(f"under --runtime {TEST_RUNTIME}: {why}")


async def wait_for_line(path: Path, prefix: str, timeout: float = 5.0) -> str:
    """The first line of `path` starting with `prefix`, waiting for it to appear."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith(prefix):
                    return line
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {prefix!r} line in {path}:\n{path.read_text() if path.exists() else ''}")


async def upload_settled(
    client: Any,
    cid: int,
    tid: int,
    token: str,
    data: bytes,
    *,
    kind: str = "source",
    note: str | None = None,
    timeout: float = 300,
) -> dict[str, Any]:
    """Team `tid`'s upload of `data` through the API (201, asserted; `note`
    as its X-Note), waited for until it is settled: what
    ``test_web_api.settled`` answers (the submission, its report and log)."""
    from tests.support.api import auth, settled

    headers = auth(token) if note is None else {**auth(token), "X-Note": note}
    r = await client.post(
        f"/api/competitions/{cid}/teams/{tid}/uploads?kind={kind}", data=data, headers=headers
    )
    assert r.status == 201, await r.text()
    return await settled(client, cid, tid, token, (await r.json())["id"], timeout=timeout)


def remove_instance_images(client: Any, instance: Any) -> None:
    """Remove every image tag of `instance` (a test's own install): children
    first (a few passes), never by force, never another instance's image."""
    for _ in range(4):
        left = [
            t
            for image in instance.images(client)
            for t in image.get("RepoTags") or ()
            if t != "<none>:<none>"
        ]
        if not left:
            return
        for t in left:
            try:
                client.images.remove(t, force=False, noprune=False)
            except Exception:
                pass


def remove_prefixed_images(client: Any, prefix: str) -> None:
    """Remove every image a test module tagged ``PREFIX-…`` (its fixture's clean-up)."""
    from referee.bots.images.builds import remove_image

    for image in client.api.images(name=f"{prefix}-*"):
        for t in image.get("RepoTags") or ():
            if t.startswith(prefix):
                remove_image(t, client)


def image_exists(client: Any, image: str) -> bool:
    """Whether the daemon has `image` (a tag or an id)."""
    try:
        client.images.get(image)
    except Exception:
        return False
    return True


LADDER = """
[tournament]
name = "gvisor class"
seed = 5
table_size = 2
schedule = "adaptive"
concurrency = 1

[stop]
max_games = 40

[timeouts]
move_ms = 3000

[ladder]
concurrency = 1

[[bots]]
name = "house"
url = "{house}"
"""


async def ladder_competition(service: Any, house: str) -> int:
    """The id of a new competition on `service` with the LADDER league, its house bot at `house`."""
    from tests.support.api import auth

    r = await service.post(
        "/api/competitions",
        json={"name": "gv", "league": LADDER.format(house=house)},
        headers=auth(service.admin),
    )
    assert r.status == 201, await r.text()
    return int((await r.json())["id"])
