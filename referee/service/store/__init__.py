"""The service database's store (issue 33): every SQL statement of the
service, one module per table group, one ordered list of schema steps.

- :mod:`.schema`: the steps from the first version on, ``PRAGMA user_version``
- :mod:`.meta`: the admin token, this install's id (``service_meta``)
- :mod:`.competitions`, :mod:`.leagues`, :mod:`.teams`, :mod:`.submissions`,
  :mod:`.uploads`, :mod:`.sessions`, :mod:`.runs`, :mod:`.practice`: a table
  group each, with its row Structs
- :mod:`.maintenance`: integrity checks, copies and path rewriting of database files
- :mod:`.db`: :class:`ServiceDB`, the one object callers hold (every table
  group's methods), and :class:`AsyncServiceDB`, its one-thread wrapper for the event loop

Nothing outside this package and :mod:`referee.tournament.store` imports
sqlite3 (tests/layout/test_layers.py).
"""

from .base import SERVICE_DB_NAME, DatabaseError, StoreError, data_dir_of, hash_token, is_busy, new_token
from .competitions import COMPETITION_PHASES, Competition
from .db import AsyncServiceDB, ServiceDB
from .leagues import LeagueVersion
from .runs import RUN_KINDS, RUN_STATUSES, Run, RunStatus
from .schema import SCHEMA_VERSION, STEPS, SchemaError
from .sessions import SESSION_S, Session
from .submissions import PENDING, SUBMISSION_STATUSES, Submission, SubmissionStatus
from .teams import Team
from .uploads import SlotRevoked

__all__ = [
    "PENDING",
    "COMPETITION_PHASES",
    "RUN_KINDS",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "SERVICE_DB_NAME",
    "SESSION_S",
    "STEPS",
    "SUBMISSION_STATUSES",
    "AsyncServiceDB",
    "Competition",
    "DatabaseError",
    "LeagueVersion",
    "Run",
    "RunStatus",
    "SchemaError",
    "ServiceDB",
    "Session",
    "SlotRevoked",
    "StoreError",
    "Submission",
    "SubmissionStatus",
    "Team",
    "data_dir_of",
    "hash_token",
    "is_busy",
    "new_token",
]
