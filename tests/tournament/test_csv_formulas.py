"""Issue 32 item 7: standings.csv holds no formula a spreadsheet would run,
whatever the bots are called; the numbers the referee computed stay numbers.

Six bots named as an attacker names them play one table of six through
``referee tournament``; the file is read back with the csv module."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What starts a formula in a spreadsheet (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NAMES = ('=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1")
#: standings.csv's columns that hold text (every other one a number or empty).
TEXT_COLUMNS = {"bot"}


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_standings_csv_holds_bot_names_as_text_never_as_formulas(tmp_path: Path) -> None:
    lines = ["[tournament]", 'name = "t"', "seed = 4", "table_size = 6", "rounds = 1", ""]
    for name in NAMES:
        command = [sys.executable, "-m", "sample_bots.random", "--port", "{port}", "--log-level", "WARNING"]
        lines += ["[[bots]]", f"name = {json.dumps(name)}", f"command = {json.dumps(command)}", ""]
    league = tmp_path / "league.toml"
    league.write_text("\n".join(lines))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "referee.cli", "tournament", str(league), "--out", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    with (out / "standings.csv").open(newline="") as f:
        table = list(csv.reader(f))
    header, rows = table[0], table[1:]
    assert len(rows) == len(NAMES)
    formulas = [
        (r, column, cell)
        for r, cells in enumerate(rows, 1)
        for column, cell in zip(header, cells)
        if cell.startswith(FORMULA_STARTS) and (column in TEXT_COLUMNS or not _number(cell))
    ]
    assert formulas == [], f"cells a spreadsheet would run: {formulas}"
    assert sorted(row[header.index("bot")] for row in rows) == sorted("'" + n for n in NAMES)
    assert all(row[header.index("mu")] and _number(row[header.index("mu")]) for row in rows)
