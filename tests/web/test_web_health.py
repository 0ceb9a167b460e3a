"""Which faults are the service's (issue 25, item 1): the table
:func:`referee.service.health.classify` and :func:`refusal_is_service` keep,
on the errors Python, SQLite and the build module really raise, and the
capped back-off. (The faults themselves, for real: tests/containers/test_service_faults.py.)"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from referee.bots.sandbox.docker_daemon import DockerUnavailable
from referee.service.health import Health, ServiceFault, backoff, classify, refusal_is_service, team_reason


def test_the_data_disk_full_is_the_services(tmp_path: Path) -> None:
    e = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))
    fault = classify(e)
    assert fault is not None and fault.summary == "the server's disk is full"


def test_a_locked_database_is_the_services(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    a = sqlite3.connect(db, timeout=0, isolation_level=None)
    b = sqlite3.connect(db, timeout=0, isolation_level=None)
    a.execute("CREATE TABLE t (x)")
    a.execute("BEGIN EXCLUSIVE")
    with pytest.raises(sqlite3.OperationalError) as got:
        b.execute("INSERT INTO t VALUES (1)")
    a.close()
    b.close()
    fault = classify(got.value)
    assert fault is not None and fault.summary == "the service's database is locked"


def test_docker_unavailable_and_an_unknown_error_are_the_services() -> None:
    fault = classify(DockerUnavailable("no Docker daemon answers at unix:///x"))
    assert fault is not None and fault.docker and fault.summary == "Docker is not reachable"
    assert "unix:///x" in fault.cause and "unix:///x" not in fault.summary
    bug = classify(KeyError("oops"))
    assert bug is not None and bug.cause.startswith("an error in the service: KeyError")
    assert not bug.docker


def test_a_teams_refusal_stays_the_teams_even_when_its_files_quote_server_words() -> None:
    assert (
        refusal_is_service("Python could not compile the bot's files: the build log shows the error") is None
    )
    # the compile step's message never names the team's words, but a refusal that starts so is the team's
    assert refusal_is_service("Python could not compile: no space left on device") is None
    assert refusal_is_service("the bot's files are 80 MiB, more than the 64 MiB a build may add") is None
    full = refusal_is_service("the build failed: write /var/lib/docker/x: no space left on device")
    assert full is not None and full.summary == "the server's disk is full"
    daemon = refusal_is_service("the Docker daemon refused the build: 500 Server Error")
    assert daemon is not None and daemon.docker


def test_the_back_off_doubles_up_to_its_cap() -> None:
    assert [backoff(n, 10, 600) for n in range(1, 9)] == [10, 20, 40, 80, 160, 320, 600, 600]
    assert backoff(10_000, 0.5, 2) == 2


def test_the_banner_says_the_cause_and_goes_when_well() -> None:
    h = Health()
    assert h.banner() is None
    h.fault("Docker is not reachable: no daemon at unix:///x", 1e9, 2)
    text = h.banner()
    assert text is not None and "unix:///x" in text and "2 submission(s) wait" in text
    h.recovered()
    assert h.banner() is None
    assert team_reason("Docker is not reachable", 0).startswith(
        "nothing is wrong with your bot: the server could not check it (Docker is not reachable); "
        "it will be retried at 00:00:00 UTC"
    )
    assert isinstance(ServiceFault("x"), Exception)
