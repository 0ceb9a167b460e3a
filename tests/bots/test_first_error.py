"""Issue 35, item 4: a refusal points at the line. The first error of a build
log or a bot's output, on logs captured from the real tools (compileall,
a Python traceback, node --check, node running a bot without its module)."""

from __future__ import annotations

import sys

from referee.admission import admit
from referee.bots.factory import BotSpec
from referee.bots.images.first_error import SourceError, first_error
from referee.bots.images.source_build import step_failure

#: `referee`'s own lines around compileall's report, as in a source build's log.
COMPILEALL = """source: zip, 0.0 MB, sha256 4f2a
unpacked 3 files, 0.0 MB
a python bot: bot.py
the bot's files into /app/bot, owned by 12345:12345, in a container FROM sha256:ab
*** Error compiling '/app/bot/helper.py'...
  File "/app/bot/helper.py", line 2
    def broken(:
               ^
SyntaxError: invalid syntax

the compile step ran under the runtime runc as 12345:12345: exit code 1
"""

TRACEBACK = """bot starting
Traceback (most recent call last):
  File "/app/bot/bot.py", line 4, in <module>
    from strategy import decide
  File "/app/bot/strategy.py", line 2, in <module>
    import numpy as np
ModuleNotFoundError: No module named 'numpy'
"""

NODE_CHECK = """/app/bot/bot.js:3



SyntaxError: Unexpected end of input
    at wrapSafe (node:internal/modules/cjs/loader:1464:18)
    at checkSyntax (node:internal/main/check_syntax:78:3)

Node.js v20.20.2
"""

NODE_MISSING = """node:internal/modules/cjs/loader:1210
  throw err;
  ^

Error: Cannot find module 'lodash'
Require stack:
- /app/bot/bot.js
    at Module._resolveFilename (node:internal/modules/cjs/loader:1207:15)
    at require (node:internal/modules/helpers:182:18)
    at Object.<anonymous> (/app/bot/bot.js:1:1)
    at Module._compile (node:internal/modules/cjs/loader:1521:14) {
  code: 'MODULE_NOT_FOUND',
  requireStack: [ '/app/bot/bot.js' ]
}
"""


def test_compileall_s_report_gives_the_file_line_and_error() -> None:
    found = first_error(COMPILEALL)
    assert found == SourceError("helper.py", 2, "SyntaxError: invalid syntax", None, "python")
    assert str(found) == "helper.py, line 2: SyntaxError: invalid syntax"
    reason = step_failure("Python could not compile the bot's files", COMPILEALL)
    assert reason == (
        "Python could not compile the bot's files: helper.py, line 2: SyntaxError: invalid syntax; "
        "fix it and upload again"
    )


def test_a_traceback_gives_its_last_frame_and_the_missing_module() -> None:
    found = first_error(TRACEBACK)
    assert found is not None
    assert (found.file, found.line, found.module) == ("strategy.py", 2, "numpy")
    assert str(found) == "strategy.py, line 2: ModuleNotFoundError: No module named 'numpy'"


def test_node_s_errors_are_found_too() -> None:
    found = first_error(NODE_CHECK)
    assert found == SourceError("bot.js", 3, "SyntaxError: Unexpected end of input", None, "node")
    missing = first_error(NODE_MISSING)
    assert missing is not None
    assert (missing.file, missing.line, missing.module) == ("bot.js", 1, "lodash")


def test_no_error_is_no_error() -> None:
    assert first_error("bot starting\nlistening on /sock/bot.sock\nWARNING: slow start\n") is None
    assert step_failure("Python could not compile the bot's files", "exit code 1\n") == (
        "Python could not compile the bot's files: the build log shows the error; fix it and upload again"
    )


async def test_a_bot_that_imports_a_missing_module_is_told_which_and_what_to_do(tmp_path: object) -> None:
    """The admission check of a real bot process that dies at its import:
    the report's first line names the module, file and line; the fix says what
    a bot may import and how to vendor the rest."""
    from pathlib import Path

    folder = Path(str(tmp_path))
    (folder / "bot.py").write_text("import json\nimport numpy_for_the_test\n")
    spec = BotSpec(name="ada", command=[sys.executable, str(folder / "bot.py"), "--port", "{port}"])
    report = await admit(spec, out_dir=folder / "check")
    assert not report.ok
    assert report.reason is not None
    assert report.reason.startswith("start: ")
    assert "bot.py, line 2: ModuleNotFoundError: No module named 'numpy_for_the_test'" in report.reason
    fix = next(line.fix for line in report.lines if not line.ok)
    assert "'numpy_for_the_test'" in fix and "aiohttp, msgspec" in fix and "vendor" in fix
    assert "docs/student.md" in fix
