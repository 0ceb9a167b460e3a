"""What a Python bot's image holds of this repository is enough to import it
(issue 28, item 4: the sample league of docker/compose.yaml, run for the
first time, found the searcher's image failing at ``import referee``, whose
``__init__`` imports ``referee._compiled``, which no image held).

No Docker here: the files are copied to a folder and imported from it by a
Python that sees nothing else of this checkout."""

from __future__ import annotations

import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

from referee.bots.images import source_build
from referee.bots.images.baseimage import DOCKER_DIR, ROOT, sdk_files

#: What the images' bots import: the SDK, every sample bot, the searcher's rules engine.
IMPORTS = "import referee, referee.game, sample_bots.sdk, sample_bots.searcher, sample_bots.tactician"


def test_the_sdk_files_alone_import_the_searcher_and_the_engine(tmp_path: Path) -> None:
    for rel, src in sdk_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, tmp_path / rel)
    # -S: no .pth file runs, so this checkout's own install (an editable one's
    # finder maps every referee module to the checkout) is not seen; the
    # site-packages folders themselves give aiohttp and msgspec.
    path = [str(tmp_path), *site.getsitepackages()]
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path[:0] = {path!r}; {IMPORTS}; print(referee.__file__)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "referee" / "__init__.py")


def _copied(dockerfile: str) -> set[str]:
    """The sources of a Dockerfile's COPY lines."""
    found: set[str] = set()
    for line in dockerfile.splitlines():
        if m := re.match(r"COPY\s+(?:--\S+\s+)*(.+)$", line.strip()):
            found.update(m.group(1).split()[:-1])
    return found


def test_the_templates_copy_what_the_sdk_files_hold_of_the_referee() -> None:
    """docker/bot-python.Dockerfile (the template bot authors build) and the
    service's SDK image copy the same parts of ``referee/`` as sdk_files()."""
    held = {
        rel if rel.count("/") == 1 else rel.split("/", 2)[0] + "/" + rel.split("/", 2)[1] + "/"
        for rel in sdk_files()
        if rel.startswith("referee/")
    }
    assert "referee/_compiled.py" in held
    for text in ((DOCKER_DIR / "bot-python.Dockerfile").read_text(), source_build._SDK_DOCKERFILE):
        copied = {c for c in _copied(text) if c.startswith("referee/")}
        assert copied == held, (copied, held)
    assert (ROOT / "referee" / "_compiled.py").is_file()
