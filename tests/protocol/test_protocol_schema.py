"""protocol.schema: the committed JSON Schema files are up to date."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from protocol import schema as schema_mod
from protocol.schema import MESSAGES, SCHEMA_DIR, main, rendered, stale, write

EXPECTED = {"BotInfo", "GameStart", "ActRequest", "ActReply", "GameEnd", "Action", "State"}


def test_one_file_per_message() -> None:
    assert set(MESSAGES) == EXPECTED
    assert set(rendered()) == {f"{n}.json" for n in EXPECTED}


def test_committed_schema_is_not_stale() -> None:
    """Regenerate in memory and compare with the committed files."""
    for filename, text in rendered().items():
        path = SCHEMA_DIR / filename
        assert path.is_file(), f"{filename} missing: run python -m protocol.schema"
        assert path.read_text(encoding="utf-8") == text, f"{filename} is stale: run python -m protocol.schema"
    assert stale() == []


def test_files_are_pretty_sorted_with_newline() -> None:
    for filename in rendered():
        text = (SCHEMA_DIR / filename).read_text(encoding="utf-8")
        assert text.endswith("}\n")
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        assert json.loads(text)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "schema"
    assert main(["--check", "--dir", str(directory)]) == 1
    assert "BotInfo.json" in capsys.readouterr().err

    assert main(["--dir", str(directory)]) == 0
    assert main(["--check", "--dir", str(directory)]) == 0

    (directory / "State.json").write_text("{}\n", encoding="utf-8")
    (directory / "Old.json").write_text("{}\n", encoding="utf-8")
    assert stale(directory) == ["Old.json", "State.json"]
    assert main(["--check", "--dir", str(directory)]) == 1
    err = capsys.readouterr().err
    assert "State.json" in err and "Old.json" in err and "ActReply.json" not in err

    assert write(directory) == ["Old.json", "State.json"]
    assert stale(directory) == []
    assert not (directory / "Old.json").exists()


def test_cli_check_on_committed_files(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "protocol.schema", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    copy = tmp_path / "copy"
    shutil.copytree(SCHEMA_DIR, copy)
    (copy / "GameEnd.json").write_text("stale\n", encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "protocol.schema", "--check", "--dir", str(copy)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1
    assert "GameEnd.json" in run.stderr


def test_schema_module_is_the_py_file() -> None:
    # protocol/schema/ (data) and protocol/schema.py (code) share a name.
    assert schema_mod.__file__ is not None and schema_mod.__file__.endswith("schema.py")
