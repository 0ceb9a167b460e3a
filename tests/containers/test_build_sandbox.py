"""A team's files never run while its source bot is built (issue 24, item 1).

The build's only ``RUN`` step compiles the bot (``python -I -m compileall``,
``node --check``): every archive here carries a file that Python or Node
would pick up by itself if the step ran in the team's folder or trusted the
environment (a ``compileall.py``, modules ``compileall`` imports,
``sitecustomize.py``, ``usercustomize.py``, a ``.pth`` file, npm lifecycle
scripts, a ``node_modules/.bin/node``). Each writes a marker into ``/tmp``
(writable by any uid, so "no marker" means "it did not run", not "it ran
without rights") and forks. The built image is then read without running it
(``docker create`` + the archive endpoint): no marker, its files owned by the
build's own uid, nothing big added.

Second layer: a RUN step that *does* run code (made here with the service's
own build call and limits, as a team cannot) gets a pids cap, a CPU quota
and the memory cap, and runs as a uid no bot uses. Third: the image may grow
by at most ``max_growth_bytes`` (what the team's files and their compiled
form add); over it, the build is refused and its image removed.
"""

from __future__ import annotations

import io
import json
import re
import secrets
import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from referee.bots.images import builds as B
from referee.bots.images import source_build
from referee.bots.images.builds import BuildResult, remove_image
from referee.bots.images.source_build import build_source
from tests.support.containers import FIGURES, upload_settled

pytestmark = (
    pytest.mark.runtime_sensitive
)  # its result can differ under gVisor: the runsc pass of .ci/run runs it again

#: Tags this module makes (removed at its end).
PREFIX = "referee-test-sandbox"

PY_BOT = """\
from protocol import APIVERSION, ActRequest, BotInfo
from sample_bots.sdk import run_bot
from sample_bots.strategy import lowest_play_index

INFO = BotInfo(apiversion=APIVERSION, name="sandboxed", author="team", version="1")


def decide(request: ActRequest) -> int:
    return lowest_play_index(request.legal)


if __name__ == "__main__":
    run_bot(decide, INFO)
"""


def payload(name: str, *, big_mib: int = 20, forks: int = 200) -> str:
    """What a hostile file does when imported: a marker, `forks` processes
    alive at once, a `big_mib` file in the image."""
    return f"""\
import os, sys, time
with open("/tmp/pwned-{name}", "w") as f:
    f.write(f"uid={{os.getuid()}}\\n")
kids = []
for _ in range({forks}):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(1.0)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
with open("/tmp/pwned-{name}", "a") as f:
    f.write(f"forked={{len(kids)}}\\n")
with open("/tmp/pwned-{name}-big", "wb") as f:
    f.write(os.urandom({big_mib} << 20))
"""


def tag(name: str) -> str:
    return f"{PREFIX}-{name}:1"


def make_zip(path: Path, files: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


@pytest.fixture(scope="module")
def client(docker_client: Any) -> Iterator[Any]:
    source_build.ensure_sdk_image(docker_client)
    yield docker_client
    for image in docker_client.api.images(name=f"{PREFIX}-*"):
        for t in image.get("RepoTags") or ():
            if t.startswith(PREFIX):
                remove_image(t, docker_client)


def listing(client: Any, image_id: str, path: str) -> dict[str, tarfile.TarInfo]:
    """The entries under `path` in the image, read without running it ({} when absent)."""
    errors = __import__("docker").errors
    container = client.containers.create(image_id, labels={"referee.test": PREFIX})
    try:
        try:
            stream, _ = container.get_archive(path)
        except errors.NotFound:
            return {}
        data = b"".join(stream)
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {info.name: info for info in tar.getmembers()}


def growth(client: Any, result: BuildResult) -> int:
    assert result.image_id is not None and result.parent_id is not None
    return int(client.images.get(result.image_id).attrs["Size"]) - int(
        client.images.get(result.parent_id).attrs["Size"]
    )


def assert_nothing_ran(client: Any, result: BuildResult, name: str) -> None:
    assert result.ok, result.log
    assert result.image_id is not None
    tmp = listing(client, result.image_id, "/tmp")
    pwned = sorted(n for n in tmp if "pwned" in n)
    assert pwned == [], f"the team's {name} ran during the build: {pwned}\n{result.log}"
    added = growth(client, result)
    assert added < 2 * 1024**2, f"the build added {added} bytes"


# ------------------------------------------------------- layer 1: nothing runs


@pytest.mark.parametrize("module", ["compileall", "py_compile", "filecmp", "argparse"])
def test_a_module_the_compile_step_imports_is_not_the_teams(client: Any, tmp_path: Path, module: str) -> None:
    """`python -m compileall` in the team's folder put it first on sys.path:
    the archive's compileall.py (or a module compileall imports) ran as root."""
    files = {"bot.py": PY_BOT, f"{module}.py": payload(module)}
    r = build_source(
        make_zip(tmp_path / "b.zip", files), tag=tag(f"mod-{module.replace('_', '-')}"), client=client
    )
    assert_nothing_ran(client, r, f"{module}.py")
    assert r.image_id is not None
    bot = listing(client, r.image_id, "/app/bot")
    # the team's module was compiled like any other file of the bot, not run
    assert any(n.startswith(f"bot/__pycache__/{module}.cpython-") for n in bot), sorted(bot)


def test_python_startup_hooks_do_not_run(client: Any, tmp_path: Path) -> None:
    """sitecustomize, usercustomize and .pth files, at the top and in a
    site-packages-like folder of the archive, and a PYTHONSTARTUP-ish file."""
    files: dict[str, bytes | str] = {
        "bot.py": PY_BOT,
        "sitecustomize.py": payload("sitecustomize", forks=2),
        "usercustomize.py": payload("usercustomize", forks=2),
        "evil.pth": "import os; open('/tmp/pwned-pth', 'w').write('pth')\n",
        "lib/python3.11/site-packages/sitecustomize.py": payload("site-sitecustomize", forks=2),
        "lib/python3.11/site-packages/evil.pth": "import os; open('/tmp/pwned-sitepth', 'w').write('x')\n",
        ".local/lib/python3.11/site-packages/usercustomize.py": payload("home-usercustomize", forks=2),
        ".pythonrc.py": payload("pythonrc", forks=2),
    }
    r = build_source(make_zip(tmp_path / "hooks.zip", files), tag=tag("hooks"), client=client)
    assert_nothing_ran(client, r, "startup hook")


def test_node_lifecycle_scripts_and_bin_do_not_run(client: Any, tmp_path: Path) -> None:
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    hostile_js = "require('fs').writeFileSync('/tmp/pwned-' + process.argv[1], 'x');\n"
    scripts = {
        k: f"node evil.js {k}"
        for k in (
            "preinstall",
            "install",
            "postinstall",
            "prepare",
            "prepack",
            "prestart",
            "start",
            "pretest",
            "build",
        )
    }
    files: dict[str, bytes | str] = {
        "package.json": json.dumps(
            {
                "name": "bot",
                "main": "bot.js",
                "scripts": scripts,
                "bin": {"node": "evil.js"},
                "dependencies": {"left-pad": "1"},
            }
        ),
        "bot.js": "console.log('hello');\n",
        "evil.js": hostile_js,
        "node_modules/.bin/node": "#!/bin/sh\necho pwned > /tmp/pwned-bin-node\n",
        "node_modules/.bin/sh": "#!/bin/sh\necho pwned > /tmp/pwned-bin-sh\n",
        "node_modules/left-pad/package.json": json.dumps(
            {"name": "left-pad", "scripts": {"install": "node ../../evil.js dep-install"}}
        ),
        "node_modules/left-pad/index.js": hostile_js,
        ".npmrc": "script-shell=/app/bot/node_modules/.bin/sh\n",
        ".noderc": hostile_js,
    }
    r = build_source(make_zip(tmp_path / "node.zip", files), tag=tag("node"), client=client)
    assert_nothing_ran(client, r, "package.json script or node_modules/.bin")
    assert r.image_id is not None
    config = client.images.get(r.image_id).attrs["Config"]
    assert not any("node_modules" in part for e in config.get("Env") or [] for part in e.split(":"))
    assert '"/usr/local/bin/node", "--check"' in r.log  # by absolute path: no PATH lookup
    # and the check still checks, as the build's uid
    broken = {**files, "bot.js": "function (\n"}
    r = build_source(make_zip(tmp_path / "broken.zip", broken), tag=tag("node-broken"), client=client)
    assert not r.ok and r.reason is not None and "node --check found an error in bot.js" in r.reason, r.log
    assert "SyntaxError" in r.log


def test_the_compile_step_runs_as_the_build_uid_not_root(client: Any, tmp_path: Path) -> None:
    """A legitimate bot: its files and the .pyc files the compile step
    wrote belong to the build's own uid (neither root nor a bot's 65534);
    the image still runs as 65534."""
    files = {"bot.py": PY_BOT, "pkg/__init__.py": "", "pkg/mod.py": "X = 1\n"}
    r = build_source(make_zip(tmp_path / "ok.zip", files), tag=tag("uid"), client=client)
    assert r.ok, r.log
    assert r.image_id is not None
    bot = listing(client, r.image_id, "/app/bot")
    pycs = {n: i for n, i in bot.items() if n.endswith(".pyc")}
    assert {n.split("/")[-1].split(".")[0] for n in pycs} >= {"bot", "__init__", "mod"}, sorted(bot)
    uids = {i.uid for i in pycs.values()}
    assert len(uids) == 1 and not uids & {0, 65534}, uids
    assert {i.uid for i in bot.values()} == uids  # the folder and the team's files too
    config = client.images.get(r.image_id).attrs["Config"]
    assert config["User"] == "65534:65534" and config["WorkingDir"] == "/app/bot"
    assert "python -I" in r.log or '"-I"' in r.log


# ------------------------------------------------ layer 2: the step's limits


SANDBOX_PROBE = r"""
import os, time
def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return "-"
kids = []
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
print(f"PROBE forked={len(kids)} uid={os.getuid()} gid={os.getgid()} "
      f"quota={read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us') or read('/sys/fs/cgroup/cpu.max')} "
      f"period={read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')} "
      f"memory={read('/sys/fs/cgroup/memory/memory.limit_in_bytes') or read('/sys/fs/cgroup/memory.max')} "
      f"caps={[l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]}", flush=True)
for pid in kids:
    os.waitpid(pid, 0)
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(100):
            f.write(b"x" * (1 << 20))
    print("PROBE wrote=100", flush=True)
except OSError as e:
    print(f"PROBE write stopped: {e}", flush=True)
"""


def test_a_run_step_that_forks_is_capped(client: Any, tmp_path: Path) -> None:
    """Were code to run in the build (it cannot: see above), the service's
    build call would give it the pids cap, the CPU quota, the memory cap, no
    capabilities and a file-size cap: a fork bomb stops at the cap."""
    parent = source_build.ensure_sdk_image(client)
    limits = B.BuildLimits(max_growth_bytes=16 * 1024**2)
    uid = source_build.build_uid(secrets.token_hex(16))
    dockerfile = "\n".join(
        [
            f"FROM {parent}",
            f"USER {uid}:{uid}",
            f"RUN {json.dumps(['/usr/local/bin/python', '-I', '-c', SANDBOX_PROBE])}",
            "",
        ]
    )
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    context.seek(0)
    log = B.BuildLog()
    try:
        image_id = B.daemon_build(client, context, tag=tag("probe"), timeout_s=60, log=log, limits=limits)
    except B.Refused as e:  # the file-size cap ends the write with SIGXFSZ: a failed step
        image_id = None
        assert "non-zero code" in str(e) or "build failed" in str(e), str(e)
    text = log.text()
    probe = next((line for line in text.splitlines() if line.startswith("PROBE forked=")), None)
    assert probe is not None, text
    fields = dict(part.split("=", 1) for part in probe.split()[1:])
    FIGURES["fork bomb in a build step"] = f"{fields['forked']} of 300 forks"
    assert int(fields["forked"]) < B.BUILD_PIDS, probe
    assert int(fields["uid"]) == uid != 0
    assert fields["quota"] in (str(int(B.BUILD_CPUS * 100_000)), f"{int(B.BUILD_CPUS * 100_000)} 100000"), (
        probe
    )
    assert fields["memory"] == str(B.BUILD_MEMORY), probe
    assert int(fields["caps"], 16) == 0, probe
    lines = text.splitlines()
    assert "PROBE write stopped: [Errno 27] File too large" in lines and "PROBE wrote=100" not in lines, text
    if image_id is not None:
        remove_image(tag("probe"), client)


# ---------------------------------------------------- layer 3: the growth cap


def test_files_over_the_growth_cap_are_refused_before_the_build(client: Any, tmp_path: Path) -> None:
    files: dict[str, bytes | str] = {"bot.py": PY_BOT, "data.bin": secrets.token_bytes(3 * 1024**2)}
    r = build_source(
        make_zip(tmp_path / "big.zip", files), tag=tag("big"), client=client, max_growth_bytes=2 * 1024**2
    )
    assert not r.ok and r.reason is not None, r.log
    assert "2.0 MiB" in r.reason and "leave out" in r.reason, r.reason
    import docker.errors

    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(tag("big"))


def test_a_build_whose_compiled_files_go_over_the_cap_is_refused_and_removed(
    client: Any, tmp_path: Path
) -> None:
    """1.2 MiB of source under a 2 MiB cap, but its compiled form doubles it:
    the image, measured against its parent, is over; it is removed."""
    blob = "DATA = " + repr(secrets.token_hex(600 * 1024)) + "\n"  # 1.2 MiB of text, ~1.2 MiB of pyc
    files: dict[str, bytes | str] = {"bot.py": PY_BOT, "blob.py": blob}
    r = build_source(
        make_zip(tmp_path / "blob.zip", files), tag=tag("blob"), client=client, max_growth_bytes=2 * 1024**2
    )
    assert not r.ok and r.reason is not None, r.log
    assert "adds" in r.reason and "2.0 MiB" in r.reason and "compiled" in r.reason, r.reason
    assert r.image_id is None
    import docker.errors

    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(tag("blob"))
    left = client.images.list(all=True, filters={"label": f"{B.INPUT_LABEL}={r.input_sha256}"})
    assert left == [], "nothing of the refused build is left"


def test_a_bot_under_the_cap_says_what_it_added(client: Any, tmp_path: Path) -> None:
    r = build_source(make_zip(tmp_path / "ok.zip", {"bot.py": PY_BOT}), tag=tag("small"), client=client)
    assert r.ok, r.log
    assert re.search(r"^the build added \d+\.\d MiB to the image \(at most 64\.0 MiB\)$", r.log, re.M), r.log
    added = growth(client, r)
    FIGURES["a small python bot adds"] = f"{added} bytes"
    assert added < 64 * 1024


# ------------------------------------------------- through the service, the CLI


async def test_the_service_passes_its_growth_cap_to_the_build(service_client: Any, tmp_path: Path) -> None:
    """``Settings.max_build_growth`` (``referee serve --max-build-growth``)
    reaches the build: a team's upload over it is refused, and says why."""
    from tests.support.api import new_competition, new_team

    client = await service_client(max_build_growth=1024**2)
    admin = client.admin
    cid = await new_competition(client, admin)
    tid, token = await new_team(client, admin, cid, "team big")
    archive = make_zip(tmp_path / "big.zip", {"bot.py": PY_BOT, "data.bin": secrets.token_bytes(2 * 1024**2)})
    done = await upload_settled(client, cid, tid, token, archive.read_bytes(), timeout=120)
    sub = done["submission"]
    assert sub["status"] == "refused", done
    assert "more than the 1.0 MiB a build may add" in sub["reason"], sub["reason"]


@pytest.mark.parametrize("value,ok", [("12q", False), ("512k", False), ("1m", True)])
def test_serve_parses_max_build_growth(tmp_path: Path, value: str, ok: bool) -> None:
    """A bad size stops ``referee serve`` before it starts (a good one gets
    as far as the port: here one in use, so it stops there)."""
    import socket

    from click.testing import CliRunner

    from referee.cli.serve import serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            serve, ["--db", str(tmp_path / "s.sqlite"), "--port", str(port), "--max-build-growth", value]
        )
    if ok:  # parsed, then stopped at the port in use
        assert "--max-build-growth" not in result.output, result.output
        assert isinstance(result.exception, OSError) and "address already in use" in str(result.exception)
    else:
        assert result.exit_code == 2 and "--max-build-growth" in result.output, result.output
