"""benchmarks/service_scale.py runs (issue 37): a term's data generated, the
real service timed on it against an empty one. Its quick mode prints every
figure as one JSON object on the last line: its keys are checked, no timing
is asserted (the figures are the benchmark's, read on the performance page).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "service_scale.py"

#: Every read the benchmark times, in both services.
PAGES = {
    "leaderboard",
    "leaderboard_ladder",
    "competition_api",
    "bot_page_first",
    "bot_page_middle",
    "bot_page_last",
    "bot_page_final",
    "bot_api",
    "games_api",
    "games_api_last",
    "replay_page",
    "replay_api",
    "standings_csv",
    "team_page",
    "team_live",
    "team_diagnostics",
    "team_practice",
    "practice_replay",
    "admin_home",
    "admin_competition",
    "admin_team",
    "admin_team_diagnostics",
}


@pytest.mark.slow
def test_the_quick_run_prints_every_figure_as_json() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["sizes"] == {
        "teams": 30,
        "submissions": 300,
        "games": 20_000,
        "watchers": 100,
        "requests": 10,
    }
    for side in ("empty", "term"):
        run = figures[side]
        assert set(run["pages"]) == PAGES
        for page in run["pages"].values():
            assert set(page) == {"first", "p50", "p95", "kb"}
            assert page["p95"] >= page["p50"] > 0
        assert set(run["fan_out"]) >= {"watchers", "p50", "p95", "all"}
        assert run["fan_out"]["watchers"] == 100 and run["fan_out"]["all"] > 0
        assert set(run["size"]) == {"service_db_mb", "run_dbs_mb", "bytes_per_game"}
        for key in ("backup_ms", "restore_ms", "rss_peak_mb", "generate_s", "start_ms"):
            assert run[key] > 0 or key == "generate_s"
    assert set(figures["x_empty"]) == PAGES | {"backup_ms", "restore_ms", "rss_peak_mb", "fan_out"}
    assert figures["worst_p95_ms"] == max(p["p95"] for p in figures["term"]["pages"].values())
