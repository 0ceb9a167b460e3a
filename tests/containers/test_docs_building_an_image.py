"""The docs' "Building an image", run as written (issue 26, item 8).

The commands of that section's shell block are taken from docs/containers.md and
run by bash, one script, from a copy of the repository's root (so that the
archive ``docker save`` writes lands there), on this machine: no registry,
the base images made by ``python -m referee.bots.images.baseimage``. Then each
image it built is started as the referee starts a container bot (read-only,
no network, no capability) and must answer the protocol: the starter kit
with the SDK the template keeps, the tactician, the Node bot.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from referee.bots.sandbox.container import ContainerBot

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: The images the docs' commands make.
MADE = ("my-bot:1", "tactician-bot:1", "my-node-bot:1")


def readme_commands() -> str:
    """The first ``sh`` block of docs/containers.md's "Building an image" section."""
    text = (ROOT / "docs" / "containers.md").read_text()
    section = text.split("\n## Building an image\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "docs/containers.md's 'Building an image' has no ```sh block"
    return block.group(1)


def repository_copy(dest: Path) -> Path:
    """The repository's files as they are in this checkout (tracked and new, not ignored)."""
    names = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _remove_made(client: Any) -> None:
    import docker.errors

    for name in ("my-bot",):
        try:
            client.containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            pass
    for tag in MADE:
        try:
            client.images.remove(tag, noprune=False)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError:  # in use by a container of this test still going away
            pass


async def test_readme_commands_build_images_that_answer_the_protocol(
    docker_client: Any, tmp_path: Path, out: Path
) -> None:
    if shutil.which("node") is None:
        why = "The docs' commands build the Node bot FROM this machine's node: there is none"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true, so this test must run, but: {why}", pytrace=False)
        pytest.skip(why)
    script = readme_commands()
    assert "--print-base python" in script and "docker build" in script and "docker save" in script
    repo = repository_copy(tmp_path / "repo")
    bin_dir = tmp_path / "bin"  # `referee` and `python` as the user has them: this checkout's
    bin_dir.mkdir()
    (bin_dir / "referee").write_text(
        f"#!/bin/sh\nexec {sys.executable} -c 'from referee.cli import main; main()' \"$@\"\n"
    )
    (bin_dir / "referee").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(repo)}
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, (
            f"The docs' commands failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        assert "12 passed, 0 failed" in done.stdout, (
            done.stdout
        )  # referee check of the running kit: 11 checks and its validation games
        assert (repo / "my-bot.tar").stat().st_size > 10**6
        names = {}
        for tag in MADE:  # each image, run as the referee runs a container bot
            bot = ContainerBot(tag, out_dir=out, name=tag.split(":")[0])
            info = await bot.launch()
            try:
                names[tag] = info.name
            finally:
                await bot.stop()
        assert names == {"my-bot:1": "my-bot", "tactician-bot:1": "tactician", "my-node-bot:1": "node-greedy"}
    finally:
        _remove_made(docker_client)


async def test_the_authors_one_line_change_keeps_the_sdk(
    docker_client: Any, tmp_path: Path, out: Path
) -> None:
    """The template's advice for one's own bot: change the one COPY line of
    the bot's files; the image still has the SDK the bot imports."""
    import docker.errors

    from referee.bots.images.baseimage import build_base_image

    repo = repository_copy(tmp_path / "repo")
    template = (repo / "docker" / "bot-python.Dockerfile").read_text()
    line = "COPY starter_kits/python/ bot/\n"
    assert template.count(line) == 1, (
        "the template's line for the bot's own files has moved: fix its comments too"
    )
    (repo / "docker" / "own.Dockerfile").write_text(template.replace(line, "COPY mybot/ bot/\n"))
    (repo / "mybot").mkdir()
    kit = (repo / "starter_kits" / "python" / "bot.py").read_text()
    (repo / "mybot" / "bot.py").write_text(kit.replace('name="my-bot"', 'name="own-bot"'))
    (repo / "mybot" / "helper.py").write_text("WHO = 'a module of its own folder'\n")
    (repo / "mybot" / "bot.py").write_text(
        (repo / "mybot" / "bot.py")
        .read_text()
        .replace(
            "from sample_bots.sdk import run_bot\n",
            "from sample_bots.sdk import run_bot\nfrom helper import WHO\n",
        )
    )
    base = build_base_image(docker_client)
    tag = f"referee-test-own-bot:{os.getpid()}"
    try:
        done = subprocess.run(
            [
                "docker",
                "build",
                "-q",
                "-f",
                "docker/own.Dockerfile",
                "--build-arg",
                f"BASE={base}",
                "-t",
                tag,
                ".",
            ],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        bot = ContainerBot(tag, out_dir=out, name="own")
        info = await bot.launch()
        await bot.stop()
        assert info.name == "own-bot"
    finally:
        try:
            docker_client.images.remove(tag)
        except docker.errors.ImageNotFound:
            pass
