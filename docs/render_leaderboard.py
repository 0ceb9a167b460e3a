"""Render docs/leaderboard.png: the sample league on ``referee serve``, in Chromium.

    python docs/render_leaderboard.py [--chromium /usr/bin/chromium] [--port 8791]

Starts the service from this checkout over a new database in a temporary folder (house
commands allowed: the league's bots are the sample bots it starts itself, on loopback),
creates a competition from ``tournaments/league.toml``, plays one run, and saves the top of
its leaderboard page (1,280 px wide) as it is rendered by Playwright's Chromium. Not part of
the site (``mkdocs.yml`` excludes it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "leaderboard.png"


def league_text() -> str:
    """The sample league, its bots started from this checkout, its output the service's."""
    text = (ROOT / "tournaments" / "league.toml").read_text()
    text = text.replace('cwd = ".."', f"cwd = {json.dumps(str(ROOT))}")
    return re.sub(r"(?m)^output = .*\n", "", text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium Playwright drives")
    ap.add_argument("--port", type=int, default=8791)
    args = ap.parse_args()
    base = f"http://127.0.0.1:{args.port}"

    def call(method: str, path: str, token: str, body: object | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            base + path,
            method=method,
            data=data,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())

    work = Path(tempfile.mkdtemp(prefix="referee-leaderboard-"))
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "referee.cli",
            "serve",
            "--db",
            str(work / "class.sqlite"),
            "--port",
            str(args.port),
            "--allow-house-commands",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert serve.stdout is not None
        token = ""
        for line in serve.stdout:
            if m := re.search(r"admin token[^:]*: (\S+)", line):
                token = m.group(1)
                break
        if not token:
            sys.exit("referee serve printed no admin token")
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/")
                break
            except OSError:
                time.sleep(0.2)
        cid = call("POST", "/api/competitions", token, {"name": "class-2026", "league": league_text()})["id"]
        call("POST", f"/api/competitions/{cid}/runs", token, {})
        while (run := call("GET", f"/api/competitions/{cid}", token)["run"])["status"] == "running":
            time.sleep(2)
        if run["status"] != "finished":
            sys.exit(f"the run ended {run['status']}: {run.get('error')}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base}/c/{cid}")
            page.wait_for_timeout(1000)
            box = page.locator("table").first.bounding_box()
            assert box is not None, "the leaderboard page has no table"
            page.screenshot(
                path=str(OUT), clip={"x": 0, "y": 0, "width": 1280, "height": box["y"] + box["height"] + 80}
            )
            browser.close()
        print(f"wrote {OUT.relative_to(ROOT)}")
    finally:
        serve.terminate()
        serve.wait(10)


if __name__ == "__main__":
    main()
