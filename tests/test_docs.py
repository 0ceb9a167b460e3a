"""The documentation: the MkDocs site builds with ``--strict``, no page points outside the
repository, README stays the short front page with the two commands, and the version is one
(``referee --version``, the package, the CHANGELOG) (issue 27, item 1)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import referee
from referee.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Every page a reader opens: the site's pages, the front page and the changelog.
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md", ROOT / "CHANGELOG.md"]

#: Inline links and images ``[text](target)`` / ``![alt](target)``, reference definitions
#: ``[name]: target``, and HTML ``href=`` / ``src=``.
LINK = re.compile(
    r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?[^)]*\)|^\s*\[[^\]]+\]:\s*(\S+)|(?:href|src)=[\"']([^\"']+)",
    re.MULTILINE,
)


def prose(text: str) -> str:
    """`text` without its fenced blocks and code spans (a URL in an example is not a link)."""
    text = re.sub(r"(?ms)^(```|~~~).*?^\1", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


def links(path: Path) -> list[str]:
    return [next(g for g in m.groups() if g) for m in LINK.finditer(prose(path.read_text(encoding="utf-8")))]


def outside(page: Path, target: str) -> str | None:
    """Why `target`, linked from `page`, points outside the repository (None: it does not)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("//"):
        return "a URL: the docs point only at the repository's own files"
    path = target.split("#", 1)[0]
    if not path:
        return None
    if path.startswith("/"):
        return "an absolute path"
    resolved = (page.parent / path).resolve()
    if not resolved.is_relative_to(ROOT):
        return "a path out of the repository"
    if not resolved.exists():
        return "no such file in the repository"
    return None


def test_the_link_finder_finds_every_kind_of_link() -> None:
    """The check below cannot pass by finding nothing."""
    here = DOCS / "x.md"
    text = (
        "[a](../../shared/RULES.md) ![b](leaderboard.png) [c](https://example.org/x) "
        '<a href="/etc/passwd">d</a>\n[e]: ../outside.md\n`[f](../g.md)`\n```\n[h](../i.md)\n```\n'
    )
    found = [next(g for g in m.groups() if g) for m in LINK.finditer(prose(text))]
    assert found == [
        "../../shared/RULES.md",
        "leaderboard.png",
        "https://example.org/x",
        "/etc/passwd",
        "../outside.md",
    ]
    assert [outside(here, t) is not None for t in found] == [True, False, True, True, True]


@pytest.mark.parametrize("doc", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_outside_the_repository(doc: Path) -> None:
    # (not named `page`: that is pytest-playwright's fixture, which makes a test a browser test)
    text = doc.read_text(encoding="utf-8")
    assert "../shared" not in text, f"{doc.name} names the shared folder, outside the repository"
    bad = [(t, why) for t in links(doc) if (why := outside(doc, t))]
    assert not bad, f"{doc.relative_to(ROOT)} links outside the repository: {bad}"


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: every page in the nav, every link and anchor resolves."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    html = (tmp_path / "site" / "performance" / "index.html").read_text(encoding="utf-8")
    assert "<table>" in html and "Engine throughput" in html
    assert (tmp_path / "site" / "leaderboard.png").is_file()
    assert not (tmp_path / "site" / "render_leaderboard.py").exists()


def test_the_service_still_serves_its_two_pages_from_docs() -> None:
    """docs/rules.md and docs/protocol.md are pages of the service too: they link no other page
    (a relative link would be a dead one at /rules)."""
    for name in ("rules.md", "protocol.md"):
        assert links(DOCS / name) == [], name


def test_readme_is_the_front_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 180, "README is the front page: the rest belongs in docs/"
    block = re.search(r"```sh\n(.*?)```", text, re.DOTALL)
    assert block, "README has no ```sh block of the two commands"
    commands = block.group(1)
    assert "pip install -e . && referee tournament tournaments/league.toml" in commands
    assert "pip install -e '.[test]' && python -m pytest" in commands
    assert (ROOT / "tournaments" / "league.toml").is_file()
    assert "![" in text and "docs/leaderboard.png" in text
    for role in ("Organisers and teachers", "Students and bot authors", "Operators", "Developers"):
        assert role in text, role
    linked = {t.split("#", 1)[0] for t in links(ROOT / "README.md")}
    assert {f"docs/{p.name}" for p in DOCS.glob("*.md")} <= linked, "README links every page of the docs"


def test_version_is_one_everywhere() -> None:
    """``referee --version`` prints the package's version and which engine runs; the CHANGELOG has
    an entry for it."""
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"referee {referee.__version__}", referee.engine_status()]
    assert referee.version() == referee.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", referee.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog
    assert re.search(
        rf"^## \[{re.escape(referee.__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.MULTILINE
    )
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'version = { attr = "referee.__version__" }' in pyproject
