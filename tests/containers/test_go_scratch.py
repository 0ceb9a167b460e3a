"""A Go bot as a static binary in an image FROM scratch (issue 35, item 7):
docs/writing-a-bot.md's commands, run as written (its socket folder, image and
container names made this test's own), build the image, run it with
``BOT_UNIX`` given by ``docker run`` (the image sets none) and pass
``referee check`` on its socket."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def go_block() -> str:
    text = (ROOT / "docs" / "writing-a-bot.md").read_text()
    section = text.split("\n## From scratch, in any language\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "docs/writing-a-bot.md's 'From scratch' has no ```sh block"
    return block.group(1)


@pytest.mark.slow
def test_the_docs_go_bot_from_scratch_builds_runs_without_bot_unix_in_the_image_and_passes(
    tmp_path: Path,
) -> None:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain (apt-get install golang-go): the FROM-scratch Go bot cannot be built")
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI")
    own = f"referee-test-go-{uuid.uuid4().hex[:8]}"
    (tmp_path / "sample_bots").mkdir()
    shutil.copytree(ROOT / "sample_bots" / "go", tmp_path / "sample_bots" / "go")
    script = (
        go_block()
        .replace("/tmp/gs", str(tmp_path / "gs"))
        .replace("my-go-bot:1", f"{own}:1")
        .replace("--name my-go-bot", f"--name {own}")
        .replace("docker stop my-go-bot", f"docker stop {own}")
        .replace("my-go-bot.tar", str(tmp_path / "image.tar"))
    )
    assert "my-go-bot" not in script
    env = {**os.environ, "GOCACHE": str(tmp_path / "gocache"), "GOFLAGS": "-mod=mod"}
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert re.search(r"^\d+ passed, 0 failed$", done.stdout, re.M) and "\nFAIL" not in done.stdout, (
            done.stdout
        )
        inspect = subprocess.run(
            ["docker", "image", "inspect", "-f", "{{json .Config.Env}} {{len .RootFS.Layers}}", f"{own}:1"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "BOT_UNIX" not in inspect and inspect.split()[-1] == "1"  # the binary alone, no BOT_UNIX
        assert (tmp_path / "image.tar").stat().st_size > 1_000_000
    finally:
        subprocess.run(["docker", "rm", "-f", own], capture_output=True)
        subprocess.run(["docker", "rmi", "-f", f"{own}:1"], capture_output=True)
