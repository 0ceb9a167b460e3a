"""Make ``service-0.2.0.sql``: a service database as release 0.2.0 wrote it, with a few rows.

Run once, from the repository's root (it needs git and this tree on PYTHONPATH):
``python tests/service/data/make_020.py``. It takes the service database's code
of commit b5ec645 (where ``referee/__init__.py`` says ``__version__ = "0.2.0"``;
its schema is that of referee/web/db.py there), makes a database with it in a
temporary folder, and writes its SQL dump (and ``PRAGMA user_version``) and the
tokens it handed out (``service-0.2.0.json``) beside this script.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
import types
from pathlib import Path

RELEASE = "b5ec645"
HERE = Path(__file__).resolve().parent
#: Where the dump's folders were (the test moves them to its own temporary folder).
MADE_AT = "/tmp/referee-0.2.0-fixture"


def release_module() -> types.ModuleType:
    """referee/web/db.py of the release, as a module (its relative imports made absolute)."""
    source = subprocess.run(
        ["git", "show", f"{RELEASE}:referee/web/db.py"], capture_output=True, text=True, check=True
    ).stdout
    version = subprocess.run(
        ["git", "show", f"{RELEASE}:referee/__init__.py"], capture_output=True, text=True, check=True
    ).stdout
    assert '__version__ = "0.2.0"' in version, "not the 0.2.0 release"
    module = types.ModuleType("referee_0_2_0_db")
    sys.modules[module.__name__] = module  # msgspec's Structs resolve their annotations through it
    exec(
        compile(source.replace("from ..", "from referee."), "0.2.0:referee/web/db.py", "exec"),
        module.__dict__,
    )
    return module


def main() -> None:
    old = release_module()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "service.sqlite"
        db = old.ServiceDB(path)
        admin = db.ensure_admin_token()
        db.instance_id()
        comp = db.add_competition("class of 0.2.0", '[competition]\nname = "class of 0.2.0"\n')
        (ada, ada_token), (bob, _) = db.add_teams(comp.id, ["ada", "bob"])
        sub = db.add_submission(
            ada.id, kind="url", url="http://127.0.0.1:9/", image=None, secret="s3", note="v1"
        )
        db.update_submission(sub.id, status="accepted", report='{"ok": true}')
        db.add_submission(bob.id, kind="url", url="http://127.0.0.1:9/", image=None, secret=None, note="b1")
        db.set_league(comp.id, '[competition]\nname = "class of 0.2.0"\n# v2\n', "admin (API)")
        run = db.begin_run(
            comp.id, out_dir=f"{MADE_AT}/service-data/competition-1/run-1", league_json="{}", total_games=3
        )
        db.end_run(run.id, "finished")
        db.set_phase(comp.id, "open", concurrency=2)
        db.set_deadlines(comp.id, (1900000000.0, None))
        db.withdraw_team(bob.id)
        session, _csrf = db.new_session(ada.id, lifetime_s=10 * 365 * 86400.0)
        db.db.execute(
            "INSERT INTO practice_games (competition_id, team_id, seats, status, out_dir, created_at, results)"
            " VALUES (?, ?, ?, 'finished', ?, 1.0, ?)",
            (
                comp.id,
                ada.id,
                '[{"kind": "self", "name": "ada", "pick": "self", "submission": 1}]',
                f"{MADE_AT}/service-data/competition-1/practice/game-1",
                '[{"index": 0, "names": ["ada"], "places": [1], "seat": 0}]',
            ),
        )
        version = db.version()
        db.close()
        raw = sqlite3.connect(path)
        dump = "\n".join(raw.iterdump())
        raw.close()
    (HERE / "service-0.2.0.sql").write_text(
        f"-- made by make_020.py from {RELEASE} (0.2.0)\n{dump}\nPRAGMA user_version = {version};\n"
    )
    tokens = {"admin": admin, "ada": ada_token, "ada_session": session, "made_at": MADE_AT}
    (HERE / "service-0.2.0.json").write_text(json.dumps(tokens, indent=2) + "\n")


if __name__ == "__main__":
    main()
