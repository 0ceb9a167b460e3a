"""A service installed without Docker's Python client (issue 34, item 6):
``referee serve`` says at start, in one block, what uploads lack and what
to install; a team's upload is refused as the service's state (503, not a
Docker error, not the team's bot), and its page shows why instead of the
upload form.

Nothing of Docker is faked: ``import docker`` simply fails, the package
blocked in ``sys.modules`` (in the command's own process, or in this one
while the service starts), as on a server where it is not installed.
"""

from __future__ import annotations

import html
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import auth, error_of, login, new_competition, new_team

ROOT = Path(__file__).resolve().parents[2]
#: ``referee ARGS`` in a Python whose ``import docker`` raises ImportError, its
#: server not started (serve says its start block, then returns).
NO_DOCKER = (
    "import sys; sys.modules['docker'] = None; import referee.web.server as s; "
    "s.run = lambda app, **kw: None; from referee.cli import main; main()"
)


def test_serve_says_at_start_what_uploads_lack_and_what_to_install(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_DOCKER, "serve", "--db", str(tmp_path / "s.sqlite"), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    said = done.stderr
    block = said[said.index("uploads: NOT READY") :].splitlines()[:3]
    assert "refused" in block[0] and "URL bots are taken" in block[0], said
    assert "the docker package" in block[1] and "pip install -e '.[containers]'" in block[1], said
    assert "Docker Engine running" in block[2], said
    assert said.count("uploads:") == 1, said


async def test_an_upload_is_refused_as_the_service_not_ready_and_the_team_page_says_why(
    service: Callable[..., Awaitable[Any]], admin_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)  # the install lacks Docker's client
    client = await service()
    cid = await new_competition(client, admin_token)
    tid, token = await new_team(client, admin_token, cid, "ada")
    r = await client.post(
        f"/api/competitions/{cid}/teams/{tid}/uploads?kind=source",
        data=b"PK\x05\x06" + b"\0" * 18,  # an empty zip: never looked at
        headers=auth(token),
    )
    # 503: the service's state, not the request's fault (the same upload succeeds once installed)
    err = await error_of(r, 503)
    assert err["error"].startswith("this service is not ready for uploads yet, the organiser's to fix"), err
    assert "nothing is wrong with your bot" in err["error"] and "submit the 'url'" in err["error"], err
    assert "pip install -e '.[containers]'" in err["error"], err
    assert "Docker is not reachable" not in err["error"] and err["field"] == "kind", err
    own = await (await client.get(f"/api/competitions/{cid}/teams/{tid}/bot", headers=auth(token))).json()
    assert own["submissions"] == 0, "nothing is stored"

    # the team's page: the reason where the upload form was; a URL is still taken
    await login(client, token)
    page = html.unescape(await (await client.get("/team")).text())
    assert 'id="uploads-missing"' in page and "pip install -e '.[containers]'" in page, page
    assert 'value="source"' not in page and 'value="url"' in page
