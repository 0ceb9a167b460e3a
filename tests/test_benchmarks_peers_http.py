"""benchmarks/peers_http.py runs (issue 27): the referee against kaggle-environments' URL agents.

Its quick mode plays both sides and prints both figures; without
kaggle-environments it says how to install it and exits 2. No timing is
asserted: the figures are the benchmark's, read on the performance page.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "peers_http.py"
HAS_KAGGLE = importlib.util.find_spec("kaggle_environments") is not None


@pytest.mark.skipif(
    not HAS_KAGGLE,
    reason="kaggle-environments is not installed (no dependency of the project; "
    "pip install --no-deps kaggle-environments, as benchmarks/peers_http.py says)",
)
def test_the_quick_run_prints_both_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    for side in ("kaggle", "referee"):
        assert figures[side]["games"] == 3
        assert figures[side]["decisions"] > 0
        assert figures[side]["decision_ms_median"] > 0
        assert figures[side]["round_trip_ms_median"] > 0
    assert figures["kaggle"]["decisions"] == 3 * 19  # every ConnectX game played out, no agent failed
    assert figures["ratio_median"] > 0
    text = "\n".join(lines[:-1])
    assert "kaggle-environments, ConnectX, 2 URL agents" in text
    assert "the referee, 3UP 3DOWN, 2 HttpBots" in text
    assert "kaggle / referee, a decision:" in text


def test_without_kaggle_environments_it_says_how_to_install_it() -> None:
    hide = (
        "import runpy, sys; sys.modules['kaggle_environments'] = None; "
        f"sys.argv = [{str(SCRIPT)!r}, '--quick']; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "pip install --no-deps kaggle-environments" in done.stderr
