"""The compiled engine is never stale (issue 16).

Each test copies the installed ``referee`` and ``protocol`` packages (the
extensions and their build manifest with them) into a temporary folder, may
edit a file of the copy, and imports it in a fresh interpreter that finds the
copy first. ``REFEREE_PURE`` is removed from that interpreter's environment,
so the guard is tested in both passes of CI.

On a pure install (no C compiler at install time) there is nothing to refuse:
the tests that need extensions skip, the edit test still checks the edit runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import referee
import referee._compiled as compiled

PACKAGE = Path(referee.__file__).resolve().parent
BUILT = (PACKAGE / "_compiled.json").is_file()
needs_build = pytest.mark.skipif(not BUILT, reason="a pure install: no compiled modules to guard")

PROBE = """
import referee, referee._compiled as c, referee.game.cards as cards, referee.game.state as state
from referee.game import new_game
print(referee.engine_status())
print(type(state.new_game).__name__, state.__file__)
print(getattr(cards, "EDITED", "-"))
"""


def _copy(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(PACKAGE, site / "referee", ignore=ignore)
    shutil.copytree(PACKAGE.parent / "protocol", site / "protocol", ignore=ignore)
    return site


def _run(site: Path, **env: str) -> tuple[list[str], list[str]]:
    """stdout lines and stderr lines of PROBE run against the copy."""
    environ = {k: v for k, v in os.environ.items() if k not in ("REFEREE_PURE", "PYTHONPATH")}
    environ.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", **env)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=site, env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr.splitlines()


@needs_build
def test_the_copy_runs_compiled_as_built(tmp_path: Path) -> None:
    out, err = _run(_copy(tmp_path))
    assert out[0].startswith("engine: compiled (mypyc ")
    kind, where = out[1].split(" ", 1)
    assert kind != "function"  # a compiled function is a builtin
    assert where.startswith(str(tmp_path))  # the copy's, not the installed package's
    assert err == []


@pytest.mark.parametrize("edited", ["referee/game/cards.py", "protocol/messages.py"])
def test_an_edit_to_a_source_takes_effect_at_the_next_run(tmp_path: Path, edited: str) -> None:
    """The edit runs without a rebuild: the compiled modules are refused, with one warning line."""
    site = _copy(tmp_path)
    with open(site / edited, "a") as f:
        f.write('\nEDITED = "edited"\n')
    out, err = _run(site)
    assert out[0].startswith("engine: pure Python (")
    kind, where = out[1].split(" ", 1)
    assert kind == "function" and where == str(site / "referee" / "game" / "state.py")
    if edited == "referee/game/cards.py":
        assert out[2] == "edited"
    if BUILT:
        assert len(err) == 1, err
        assert "compiled engine refused" in err[0] and edited in err[0] and "changed since compiled" in err[0]
    else:
        assert err == []


@needs_build
def test_a_library_that_does_not_load_is_refused(tmp_path: Path) -> None:
    site = _copy(tmp_path)
    (lib,) = (site / "referee").glob("_native__mypyc*")
    lib.write_bytes(b"not a shared library")
    out, err = _run(site)
    assert out[0].startswith("engine: pure Python (the compiled modules do not load")
    assert out[1].split(" ")[0] == "function"
    assert len(err) == 1 and "compiled engine refused" in err[0]


@needs_build
def test_a_missing_extension_is_refused(tmp_path: Path) -> None:
    """A compiled module whose extension is gone would run its source beside
    compiled modules that expect the compiled one: all are refused."""
    site = _copy(tmp_path)
    for so in (site / "referee" / "game").glob("view.*"):
        if so.suffix != ".py":
            so.unlink()
    out, err = _run(site)
    assert out[0].startswith("engine: pure Python (the extension of referee.game.view is missing")
    assert out[1].split(" ")[0] == "function"
    assert len(err) == 1


@needs_build
def test_extensions_without_a_manifest_are_refused(tmp_path: Path) -> None:
    site = _copy(tmp_path)
    (site / "referee" / "_compiled.json").unlink()
    out, err = _run(site)
    assert out[0].startswith("engine: pure Python (extension modules without a build manifest")
    assert out[1].split(" ")[0] == "function"
    assert len(err) == 1


def test_referee_pure_forces_the_source_quietly(tmp_path: Path) -> None:
    out, err = _run(_copy(tmp_path), REFEREE_PURE="1")
    assert out[0] == "engine: pure Python (REFEREE_PURE is set)"
    assert out[1].split(" ")[0] == "function"
    assert err == []


@pytest.mark.skipif(
    os.environ.get("REFEREE_EXPECT_COMPILED") != "1", reason="REFEREE_EXPECT_COMPILED not set"
)
def test_this_run_is_compiled_when_ci_says_so() -> None:
    """CI's first pass sets REFEREE_EXPECT_COMPILED=1: a build that fell back
    to pure Python unnoticed would otherwise test the source twice."""
    assert compiled.COMPILED, compiled.REASON
