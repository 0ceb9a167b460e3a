"""A run that died with a tmpfs mounted under its --basetemp (a cluster node
killed mid-run, as root) must not stop the next run with the same --basetemp:
pytest cannot remove a mount point and then fails at the first tmp_path with
FileExistsError (what CI once did). tests/conftest.py detaches the leftovers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="mounting needs root")
def test_a_mount_left_under_the_basetemp_does_not_stop_the_next_run(tmp_path: Path) -> None:
    base = tmp_path / "base"
    left = base / "test_killed0" / "sockets" / "bot"
    left.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(left)], check=True)
    try:
        test = tmp_path / "t" / "test_one.py"
        test.parent.mkdir()
        test.write_text("def test_tmp(tmp_path):\n    assert tmp_path.is_dir()\n")
        run = subprocess.run(
            # The project's conftest as a plugin, the test outside the project.
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "conftest",
                f"--basetemp={base}",
                str(test),
            ],
            capture_output=True,
            text=True,
            cwd=test.parent,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])},
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert "unmounted 1 mount(s) an earlier run left under" in run.stderr
        assert not os.path.ismount(left)
    finally:
        if os.path.ismount(left):
            subprocess.run(["umount", "-l", str(left)], check=False)
