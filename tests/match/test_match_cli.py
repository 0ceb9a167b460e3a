"""The command line: ``referee match`` and ``referee check`` against bots in other processes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from referee.bots import free_port
from referee.cli import main
from referee.record import MatchResult
from referee.replay import read, rerun
from tests.support.processes import LISTENING, Output, stop
from tests.support.programs.zoo import SCRIPT as ZOO

ROOT = Path(__file__).resolve().parents[2]


def _has_sample_bots() -> bool:
    return (ROOT / "sample_bots" / "random.py").exists()


@pytest.fixture(scope="module")
def bots() -> Iterator[dict[str, str]]:
    """Bots in processes of their own: name -> base URL, once each says it listens."""
    commands = {
        "random": [sys.executable, "-m", "sample_bots.random", "--port", "{port}"]
        if _has_sample_bots()
        else [sys.executable, ZOO, "good", "--port", "{port}"],
        "greedy": [sys.executable, "-m", "sample_bots.greedy", "--port", "{port}"]
        if _has_sample_bots()
        else [sys.executable, ZOO, "good", "--port", "{port}"],
    }
    for kind in ("garbage", "wrong_id", "http500", "illegal", "late"):
        commands[kind] = [sys.executable, ZOO, kind, "--port", "{port}", "--late-s", "0.3"]
    started: list[tuple[subprocess.Popen[bytes], Output]] = []
    urls: dict[str, str] = {}
    try:
        for name, command in commands.items():  # all at once: they start side by side
            port = free_port()
            argv = [part.replace("{port}", str(port)) for part in command]
            proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            started.append((proc, Output(proc.stdout, what=f"the {name} bot")))
            urls[name] = f"http://127.0.0.1:{port}"
        for _, output in started:
            output.wait_for(LISTENING)
        yield urls
    finally:
        for proc, _ in started:
            proc.terminate()
        for proc, output in started:
            stop(proc)
            output.text()


def test_match_prints_the_result(bots: dict[str, str]) -> None:
    result = CliRunner().invoke(
        main, ["match", "--bot", bots["random"], "--bot", bots["greedy"], "--seed", "3", "--move-ms", "500"]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "seed 3" in out
    assert "seat  name" in out and "p50 ms" in out
    assert "random" in out and "greedy" in out
    assert "no faults" in out


def test_match_json_and_replay(bots: dict[str, str], tmp_path: Path) -> None:
    replay = tmp_path / "game.jsonl.gz"
    result = CliRunner().invoke(
        main,
        [
            "match",
            "--bot",
            bots["random"],
            "--bot",
            bots["garbage"],
            "--bot",
            bots["greedy"],
            "--seed",
            "8",
            "--move-ms",
            "300",
            "--replay",
            str(replay),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    parsed = msgspec.json.decode(result.output.strip().splitlines()[-1], type=MatchResult)
    assert parsed.disqualified == [1]
    assert [f.kind for f in parsed.faults[1]] == ["bad_json"] * 3
    assert parsed.places[1] == 3
    record = read(replay)
    assert record.result == parsed
    assert rerun(record).places == parsed.places


def test_match_faults_are_listed(bots: dict[str, str]) -> None:
    result = CliRunner().invoke(
        main,
        ["match", "--bot", bots["http500"], "--bot", bots["random"], "--seed", "1", "--forfeit-on-first"],
    )
    assert result.exit_code == 0, result.output
    assert "disqualified" in result.output
    assert "faults:" in result.output
    assert "http_status: POST /act answered HTTP 500" in result.output


def test_match_rules_file(bots: dict[str, str], tmp_path: Path) -> None:
    good = tmp_path / "rules.toml"
    good.write_text('[rules]\nplay_for_places = true\ndeck = "italian"\n')
    result = CliRunner().invoke(
        main,
        [
            "match",
            "--bot",
            bots["random"],
            "--bot",
            bots["greedy"],
            "--bot",
            bots["random"],
            "--seed",
            "2",
            "--rules",
            str(good),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert sorted(json.loads(result.output.splitlines()[-1])["places"]) == [1, 2, 3]

    bad = tmp_path / "bad.toml"
    bad.write_text("[rules]\nplay_for_place = true\n")
    result = CliRunner().invoke(
        main, ["match", "--bot", bots["random"], "--bot", bots["greedy"], "--seed", "2", "--rules", str(bad)]
    )
    assert result.exit_code == 2
    assert "unknown key 'play_for_place' (did you mean 'play_for_places'?)" in result.output

    small = tmp_path / "small.toml"
    small.write_text('[rules.deck]\ncolours = "R"\nclear = 0\nclear_plus1 = 0\nclear_plus2 = 0\n')
    result = CliRunner().invoke(
        main,
        ["match", "--bot", bots["random"], "--bot", bots["greedy"], "--seed", "2", "--rules", str(small)],
    )
    assert result.exit_code == 2
    assert "too small" in result.output


def test_match_bad_bots() -> None:
    result = CliRunner().invoke(main, ["match", "--bot", "127.0.0.1:9", "--bot", "http://x", "--seed", "1"])
    assert result.exit_code == 2
    assert "a bot is a URL" in result.output
    port = free_port()
    result = CliRunner().invoke(
        main,
        ["match", "--bot", f"http://127.0.0.1:{port}", "--bot", f"http://127.0.0.1:{port}", "--seed", "1"],
    )
    assert result.exit_code == 1
    assert "cannot start the game" in result.output and "connection refused" in result.output
    result = CliRunner().invoke(
        main, ["match", "--bot", "cmd:python bot.py", "--bot", "cmd:x", "--seed", "1"]
    )
    assert result.exit_code == 2 and "{port}" in result.output


def test_console_script_with_command_bots(tmp_path: Path) -> None:
    """The installed ``referee`` script, with bots it starts itself.

    The script beside this interpreter, not whichever ``referee`` is on PATH:
    the tests pass the same from an activated venv or by its interpreter."""
    logs = tmp_path / "logs"
    script = Path(sys.executable).with_name("referee")
    assert script.exists(), f"{script}: the project is not installed in this interpreter's environment"
    proc = subprocess.run(
        [
            str(script),
            "match",
            "--bot",
            f"cmd:{sys.executable} {ZOO} good --port {{port}} --name alpha",
            "--bot",
            f"cmd:{sys.executable} {ZOO} wrong_id --port {{port}}",
            "--seed",
            "5",
            "--move-ms",
            "300",
            "--log-dir",
            str(logs),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "alpha" in proc.stdout
    assert "wrong_request_id" in proc.stdout
    assert f"command bots' logs in {logs}" in proc.stdout
    assert any(p.name.endswith(".stderr.log") for p in logs.iterdir())


def test_check_passes_for_a_good_bot(bots: dict[str, str]) -> None:
    result = CliRunner().invoke(main, ["check", bots["random"]])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for what in (
        "GET /",
        "POST /start",
        "/act set-up choose_up",
        "/act plain play",
        "/act forced pick-up",
        "/act 3DOWN flip",
        "/act extra action with a draw option",
        "/act V6 colour-run swap",
        "latency",
        "POST /end",
    ):
        assert any(line.startswith(f"PASS  {what}:") for line in lines), what
    assert "FAIL" not in result.output
    assert lines[-1].endswith(" passed, 0 failed")


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("garbage", "FAIL  /act plain play: bad_json: reply is not valid JSON"),
        ("wrong_id", "FAIL  /act plain play: wrong_request_id"),
        ("http500", "FAIL  /act plain play: http_status: POST /act answered HTTP 500"),
        ("illegal", "FAIL  /act plain play: illegal: play 10R: 10R is not in your hand"),
    ],
)
def test_check_fails_for_a_zoo_bot(bots: dict[str, str], kind: str, words: str) -> None:
    result = CliRunner().invoke(main, ["check", bots[kind]])
    assert result.exit_code == 1
    assert words in result.output
    assert "      fix: " in result.output
    assert "PASS  GET /" in result.output


def test_check_late_bot(bots: dict[str, str]) -> None:
    result = CliRunner().invoke(main, ["check", bots["late"], "--move-ms", "100"])
    assert result.exit_code == 1
    assert "FAIL  /act forced pick-up: timeout: no reply within 100 ms" in result.output
    assert "fix: answer within deadline_ms (100 ms), round trip included" in result.output
    assert "FAIL  latency:" in result.output


def test_check_unreachable() -> None:
    result = CliRunner().invoke(main, ["check", f"http://127.0.0.1:{free_port()}"])
    assert result.exit_code == 1
    assert "FAIL  GET /" in result.output and "start the bot" in result.output


def test_check_starts_a_command_bot_checks_it_and_stops_it(tmp_path: Path) -> None:
    """``referee check cmd:...``: a bot author need not start the bot first."""
    logs = tmp_path / "logs"
    result = CliRunner().invoke(
        main,
        ["check", f"cmd:{sys.executable} {ZOO} garbage --port {{port}}", "--log-dir", str(logs)],
    )
    assert result.exit_code == 1, result.output
    assert "PASS  start: answered GET / at http://127.0.0.1:" in result.output
    assert "FAIL  /act plain play: bad_json" in result.output
    assert f"the bot's stdout and stderr: {logs}" in result.output
    # The bot was stopped: nothing listens at the address it had.
    address = result.output.split("answered GET / at ")[1].split()[0]
    port = int(address.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_check_a_command_that_does_not_start(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "check",
            f"cmd:{sys.executable} -c 'raise SystemExit(\"no model file\")' --port {{port}}",
            "--log-dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 1
    assert "FAIL  start: " in result.output and "exited with code 1" in result.output
    assert "no model file" in result.output  # the end of its stderr
    assert "fix: run the command by hand" in result.output
    result = CliRunner().invoke(main, ["check", "cmd:python bot.py"])
    assert result.exit_code == 2 and "{port}" in result.output
