"""The service database as ``referee serve`` and ``referee start`` open it: checked first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ..service.store import ServiceDB

__all__ = ["open_service_db"]


def open_service_db(db_path: Path) -> ServiceDB:
    """The service database, checked (:func:`~referee.service.db_check.check_database`:
    SQLite, whole, a schema this referee knows, writable, every path it holds
    inside its data folder) and upgraded to this code's schema. A database
    that fails stops the command with one line (what, the file, what to do),
    before anything reads a row of it."""
    from ..service.db_check import DatabaseProblem, check_database, check_writable, explain
    from ..service.store import SchemaError, ServiceDB, StoreError

    try:
        if db_path.exists():
            check_writable(db_path)
            check_database(db_path)
        return ServiceDB(db_path)
    except (DatabaseProblem, SchemaError) as e:
        raise click.ClickException(str(e)) from None
    except (StoreError, OSError) as e:
        raise click.ClickException(explain(db_path, e)) from None
