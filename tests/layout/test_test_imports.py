"""The tests' own shape (issue 33, item 6): what tests share lives in
``tests.support`` (tests/support/), found by one name from every folder
because the repository's root is on the path (pyproject's ``pythonpath``).
So no test module imports another test module (``from test_web_api import
auth`` made one test file the helper library of thirty others, and ran
its module-level code in each), and nothing in tests/ edits ``sys.path``
(the path inserts that made those imports work, in each file that needed
one). A module under tests/ that is neither a test, a conftest nor a
package's ``__init__`` lives in tests/support/; the scripts that made a
fixture's data sit in that fixture's folder (``fixtures/``, ``data/``).

Every import counts, the ones inside functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
#: Folders of data files (and the scripts that made them), not modules.
DATA_FOLDERS = frozenset({"fixtures", "data"})


def _is_test_module(dotted: str) -> bool:
    """A test file, as pytest's rootdir insertion lets it be imported
    (``test_web_api``) or by its package path (``tests.web.test_web_api``);
    not a library's ``aiohttp.test_utils``."""
    parts = dotted.split(".")
    return parts[0].startswith("test_") or (parts[0] == "tests" and any(p.startswith("test_") for p in parts))


def _is_sys_path(node: ast.expr) -> bool:
    """``sys.path`` (or a subscript of it: ``sys.path[:0]``)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def violations(source: str, where: str) -> list[str]:
    """What in `source` (a file of tests/, `where`) breaks the two rules:
    an import of a test module, an edit of ``sys.path``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [
                f"{at}: imports the test module {a.name} (move what it shares to tests/support/)"
                for a in node.names
                if _is_test_module(a.name)
            ]
        elif isinstance(node, ast.ImportFrom):
            if node.module and _is_test_module(node.module):
                found.append(
                    f"{at}: imports from the test module {node.module} (move what it shares to tests/support/)"
                )
            found += [
                f"{at}: imports the test module {a.name} (move what it shares to tests/support/)"
                for a in node.names
                if a.name.startswith("test_") and (node.level or (node.module or "").split(".")[0] == "tests")
            ]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if _is_sys_path(node.func.value) or (
                node.func.attr == "addsitedir"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "site"
            ):
                found.append(
                    f"{at}: edits sys.path (import from tests.support instead; a child process gets PYTHONPATH)"
                )
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_sys_path(t) for t in targets):
                found.append(
                    f"{at}: edits sys.path (import from tests.support instead; a child process gets PYTHONPATH)"
                )
    return found


def _python_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def test_no_test_module_imports_another_and_none_edits_sys_path() -> None:
    found = [v for p in _python_files() for v in violations(p.read_text(), str(p.relative_to(TESTS.parent)))]
    assert not found, "\n".join(found)


def test_what_tests_share_lives_in_tests_support() -> None:
    stray = [
        str(p.relative_to(TESTS.parent))
        for p in _python_files()
        if not p.name.startswith("test_")
        and p.name not in ("conftest.py", "__init__.py")
        and "support" not in p.relative_to(TESTS).parts[:1]
        and not DATA_FOLDERS & set(p.relative_to(TESTS).parts[:-1])
    ]
    assert not stray, f"helper modules outside tests/support/ (move them there): {stray}"


@pytest.mark.parametrize(
    "source",
    [
        "from test_web_api import auth\n",
        "import test_builds\n",
        "from tests.web.test_web_api import auth\n",
        "from tests.web import test_web_api\n",
        "def f():\n    from test_web_ladder import until\n",
        "from . import test_web_api\n",
        "import sys\nsys.path.insert(0, 'tests/web')\n",
        "import sys\nsys.path.append('tests/containers')\n",
        "import sys\nsys.path[:0] = ['tests/web']\n",
        "import sys\nsys.path += ['tests/web']\n",
        "import sys\nsys.path = ['tests/web', *sys.path]\n",
        "import site\nsite.addsitedir('tests/web')\n",
        "def f():\n    import sys\n    sys.path.extend(['x'])\n",
    ],
)
def test_the_rules_catch_an_import_of_a_test_module_and_a_path_edit(source: str) -> None:
    assert violations(source, "tests/web/test_new.py")


@pytest.mark.parametrize(
    "source",
    [
        "from tests.support.api import auth, new_team\n",
        "from tests.support import budget\n",
        "import sys\nenv = {'PYTHONPATH': ':'.join(sys.path)}\n",  # reading it is no edit
        "import os\npath = os.path.join('a', 'b')\n",
        "from aiohttp.test_utils import TestClient\n",
    ],
)
def test_the_rules_let_support_imports_and_path_reads_pass(source: str) -> None:
    assert violations(source, "tests/web/test_new.py") == []
