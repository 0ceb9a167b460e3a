"""The SDK as a wheel served by the service (issue 35, item 1): ``GET /sdk/``
lists it, ``GET /sdk/<wheel>`` downloads it, and the served wheel, installed
into a bare venv (msgspec and nothing else: no referee, no aiohttp), runs the
Python starter kit, which passes ``referee check``."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from referee.service.store import data_dir_of
from referee.web import Settings, make_app
from referee.web.sdk_wheel import build, wheel_name
from tests.support.web import Background, db_file, new_admin_token, referee_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A service on loopback (its data folder in tmp_path): its base URL."""
    db = db_file(tmp_path)
    new_admin_token(db)
    bg = Background()
    try:
        yield bg.serve(lambda: make_app(db, Settings()))
    finally:
        bg.close()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        return bytes(r.read())


def test_sdk_index_links_the_wheel_with_its_hash_and_the_wheel_downloads(served: str, tmp_path: Path) -> None:
    page = _get(f"{served}/sdk/").decode()
    link = re.search(r'href="([^"#]+)#sha256=([0-9a-f]{64})"', page)
    assert link is not None, page
    assert link.group(1) == wheel_name()
    assert f"pip install referee-sdk --find-links {served}/sdk/" in page
    wheel = _get(f"{served}/sdk/{link.group(1)}")
    assert hashlib.sha256(wheel).hexdigest() == link.group(2)
    assert wheel == build()  # the same files make the same bytes
    cached = data_dir_of(db_file(tmp_path)) / "sdk" / wheel_name()
    assert cached.read_bytes() == wheel  # cached in the data folder
    names = set(zipfile.ZipFile(cached).namelist())
    assert {"protocol/__init__.py", "protocol/schema/ActRequest.json", "sample_bots/sdk.py"} <= names
    assert not any(n.startswith("referee/") for n in names)  # no referee runtime
    meta = zipfile.ZipFile(cached).read(f"referee_sdk-{wheel_name().split('-')[1]}.dist-info/METADATA")
    requires = [line for line in meta.decode().splitlines() if line.startswith("Requires-Dist:")]
    assert requires == ["Requires-Dist: msgspec>=0.18"]
    with pytest.raises(urllib.error.HTTPError) as e:
        _get(f"{served}/sdk/referee_sdk-0.0.1-py3-none-any.whl")
    assert e.value.code == 404 and wheel_name() in e.value.read().decode()


def _wheelhouse_with_msgspec(folder: Path) -> None:
    """msgspec's wheel, of the version this Python runs (pip's cache or PyPI)."""
    import msgspec

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-q",
            "-d",
            str(folder),
            f"msgspec=={msgspec.__version__}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_served_wheel_in_a_bare_venv_runs_the_python_kit_which_passes_the_check(
    served: str, tmp_path: Path
) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    page = _get(f"{served}/sdk/").decode()
    name = re.search(r'href="([^"#]+)#', page)
    assert name is not None
    (house / name.group(1)).write_bytes(_get(f"{served}/sdk/{name.group(1)}"))
    _wheelhouse_with_msgspec(house)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    # nothing of this checkout or of this Python's packages: no PYTHONPATH, a folder of its own
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(house), "referee-sdk"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    ).stdout
    assert sorted(line.split("==")[0] for line in listed.split()) == [
        "msgspec",
        "pip",
        "referee-sdk",
        "setuptools",
    ]
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import sys, protocol, sample_bots.sdk as s; print(s.__file__, 'aiohttp' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.split() == [
        str(next(venv.glob("lib/python3*/site-packages/sample_bots/sdk.py"))),
        "False",
    ]
    for kit in sorted(p.parent for p in (ROOT / "starter_kits").glob("*/bot.py")):  # each Python kit
        mine = tmp_path / f"kit-{kit.name}"
        shutil.copytree(kit, mine)
        # the referee (from this checkout: cwd) starts the venv's Python on the kit's bot.py
        check = subprocess.run(
            [*referee_cli("check", f"cmd:{python} {mine / 'bot.py'} --port {{port}}")],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=240,
        )
        assert check.returncode == 0, check.stdout + check.stderr
        assert " 0 failed" in check.stdout and "FAIL" not in check.stdout, check.stdout
