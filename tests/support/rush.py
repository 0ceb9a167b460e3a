"""A deadline rush (issue 37): N teams' uploads arriving at once at a real
service on loopback, each timed from its upload to its verdict. Shared by
``benchmarks/rush.py`` and ``tests/cluster/test_rush_two_nodes.py``.

The uploads: a team's Python source zip (the kit's shape: ``bot.py`` on the
SDK, a helper module), a ``docker save`` of a sample bot's image, and a few
broken ones, each refused for its own reason (a bot that crashes at start, a
source that does not compile)."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from aiohttp import web

from referee.bots import free_port
from tests.support.api import auth
from tests.support.builds import make_zip, python_bot_files, save_image
from tests.support.web import LOOPBACK, new_admin_token

CRASH_PY = "import sys\nprint('bot: cannot find my model file', file=sys.stderr)\nsys.exit(3)\n"
BROKEN_PY = "def decide(request:\n    return 0\n"

#: What each kind of upload must come to, and a word of its reason when refused.
EXPECTED = {
    "source": ("accepted", None),
    "image": ("accepted", None),
    "crash": ("refused", "exited with code 3"),
    "syntax": ("refused", "compile"),
}


class Upload(msgspec.Struct, kw_only=True):
    """One team's upload: its kind (a key of EXPECTED), the API's ``kind``, the bytes."""

    what: str
    kind: str
    data: bytes


class Verdict(msgspec.Struct, kw_only=True):
    what: str
    sid: int
    status: str
    reason: str | None
    image_id: str | None
    #: Seconds from the upload's sending to its verdict (the service's own record of it).
    seconds: float
    #: Where its time went (seconds by phase: the pipeline's ``Pipeline.phases``).
    phases: dict[str, float] = {}


def uploads(n: int, folder: Path, image: str, *, images: int, broken: int) -> list[Upload]:
    """`n` uploads: `images` docker-save archives of `image`, `broken` broken
    ones (crash and syntax in turn), the rest source zips (each its own name,
    so each builds an image of its own)."""
    from referee.bots.sandbox.docker_daemon import docker_client

    folder.mkdir(parents=True, exist_ok=True)
    archive = save_image(docker_client(), image, folder / "image.tar").read_bytes() if images else b""
    out: list[Upload] = []
    for i in range(n):
        if i % max(1, n // max(1, broken)) == 1 and sum(u.what in ("crash", "syntax") for u in out) < broken:
            what = (
                "crash"
                if sum(u.what == "crash" for u in out) <= sum(u.what == "syntax" for u in out)
                else "syntax"
            )
            files: dict[str, bytes | str] = {"bot.py": CRASH_PY if what == "crash" else BROKEN_PY}
            out.append(
                Upload(what=what, kind="source", data=make_zip(folder / f"{i}.zip", files).read_bytes())
            )
        elif i % max(1, n // max(1, images)) == 0 and sum(u.what == "image" for u in out) < images:
            out.append(Upload(what="image", kind="archive", data=archive))
        else:
            zipped = make_zip(folder / f"{i}.zip", python_bot_files(f"team-{i}")).read_bytes()
            out.append(Upload(what="source", kind="source", data=zipped))
    return out


def percentiles(values_ms: Sequence[float]) -> dict[str, int]:
    """p50, p95 and max of `values_ms` (rounded ms)."""
    times = sorted(values_ms)
    q = statistics.quantiles(times, n=20, method="inclusive") if len(times) > 1 else times * 19
    return {"p50": round(statistics.median(times)), "p95": round(q[18]), "max": round(times[-1])}


def figures(verdicts: Sequence[Verdict], wall_s: float) -> dict[str, Any]:
    """p50, p95 and max of upload-to-verdict (ms), submissions a minute over the
    burst, and each phase's p50, p95 and max (ms, over the submissions that had it)."""
    times = [v.seconds * 1000 for v in verdicts]
    names = sorted({name for v in verdicts for name in v.phases})
    return {
        "n": len(times),
        **percentiles(times),
        "per_minute": round(len(times) / wall_s * 60, 1),
        "wall_ms": round(wall_s * 1000),
        "accepted": sum(v.status == "accepted" for v in verdicts),
        "refused": sum(v.status == "refused" for v in verdicts),
        "phases": {
            name: percentiles([v.phases[name] * 1000 for v in verdicts if name in v.phases]) for name in names
        },
    }


def busy_cpu_s() -> float:
    """The machine's CPU seconds spent busy since boot, every process's (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def rush(
    db_path: Path, batch: Sequence[Upload], *, workers: int | None, **settings: Any
) -> tuple[list[Verdict], float, Any, int, float]:
    """The service (``make_app``, on 127.0.0.1) on a new database at
    `db_path` with `workers` admission workers (None: the service's default)
    and `settings`; one team per upload, every upload sent at once: the
    verdicts, the burst's seconds (first upload sent to last verdict), where
    they ran (the pipeline's :class:`~referee.service.check_site.CheckSite`),
    how many admission workers the service had, and the CPU seconds the whole
    machine spent busy over the burst (service, daemons, bots, Ray, registry)."""
    from referee.service.store import ServiceDB
    from referee.web import Settings, make_app
    from referee.web.app_state import ROOM

    admin = new_admin_token(db_path)
    app = make_app(
        db_path,
        Settings(
            bot_policy=LOOPBACK,
            validation_games=2,
            admission_workers=workers,
            submissions_per_window=1000,
            **settings,
        ),
    )
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    base = f"http://127.0.0.1:{port}"
    room = app[ROOM]
    try:
        # As before a deadline: the service up a while, its builds' base images made where they run.
        assert room.pipeline.site is not None
        await room.pipeline.site.warm()
        async with aiohttp.ClientSession(base, timeout=aiohttp.ClientTimeout(total=900)) as http:
            league = '[tournament]\nname = "rush"\nseed = 5\ntable_size = 2\nrounds = 1\n\n[timeouts]\nmove_ms = 10000\n'
            r = await http.post(
                "/api/competitions", json={"name": "rush", "league": league}, headers=auth(admin)
            )
            assert r.status == 201, await r.text()
            cid = int((await r.json())["id"])
            teams: list[tuple[int, str]] = []
            for i in range(len(batch)):
                r = await http.post(
                    f"/api/competitions/{cid}/teams", json={"name": f"team {i}"}, headers=auth(admin)
                )
                assert r.status == 201, await r.text()
                body = await r.json()
                teams.append((int(body["id"]), str(body["token"])))

            async def send(up: Upload, tid: int, token: str) -> tuple[int, float]:
                sent = time.time()
                r = await http.post(
                    f"/api/competitions/{cid}/teams/{tid}/uploads?kind={up.kind}",
                    data=up.data,
                    headers=auth(token),
                )
                assert r.status == 201, await r.text()
                return int((await r.json())["id"]), sent

            t0, cpu0 = time.perf_counter(), busy_cpu_s()
            sent = await asyncio.gather(*(send(up, tid, tok) for up, (tid, tok) in zip(batch, teams)))
            done = await asyncio.gather(*(room.pipeline.wait_for(sid, 1800) for sid, _ in sent))
            wall, cpu = time.perf_counter() - t0, busy_cpu_s() - cpu0
            site = room.pipeline.site
            workers_used = room.pipeline.workers
        db = ServiceDB(db_path)
        try:
            verdicts = []
            for up, (sid, at), sub in zip(batch, sent, done):
                row = db.submission(sid)
                assert row is not None and row.updated_at is not None
                verdicts.append(
                    Verdict(
                        what=up.what,
                        sid=sid,
                        status=sub.status,
                        reason=sub.reason,
                        image_id=sub.image_id,
                        seconds=row.updated_at - at,
                        phases=dict(room.pipeline.phases.get(sid, {})),
                    )
                )
        finally:
            db.close()
        return verdicts, wall, site, workers_used, cpu
    finally:
        await runner.cleanup()


def wrong(verdicts: Sequence[Verdict]) -> list[str]:
    """The verdicts that are not what their upload must come to (empty: all right)."""
    out = []
    for v in verdicts:
        status, word = EXPECTED[v.what]
        if v.status != status or (word is not None and word not in (v.reason or "")):
            out.append(f"{v.what} #{v.sid}: {v.status} ({v.reason})")
    return out
