"""What the test suites share: helpers, fixtures and the bot programs they run.

A test module imports from here (``from tests.support.api import auth``),
never from another test module, and nothing in tests/ edits ``sys.path``
(tests/layout/test_test_imports.py pins both): the repository's root is on
the path (pyproject's ``[tool.pytest.ini_options] pythonpath``), so
``tests.support`` is found by one name from every folder.
"""

from pathlib import Path

#: The repository's root.
ROOT = Path(__file__).resolve().parents[2]
#: The bot programs (tests/support/programs/): run them as ``python PROGRAMS / NAME``.
PROGRAMS = Path(__file__).resolve().parent / "programs"
