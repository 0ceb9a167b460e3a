"""Instance ids and names without a daemon (issue 24, item 8): what every
tag, container name and label of one install is made of, where its id and
its pins are kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from referee.bots.sandbox import instance as I
from referee.bots.sandbox.instance import Instance
from referee.cli import main
from referee.service.pipeline import image_tag, service_instance
from referee.service.store import ServiceDB


def test_every_name_carries_the_id() -> None:
    a, b = Instance("lab1"), Instance("lab2")
    assert a.base_tag == "referee-base:lab1" and a.sdk_tag == "referee-sdk-python:lab1"
    assert a.node_base_tag == "referee-node-base:lab1" and a.bot_tag("greedy") == "referee-bot-greedy:lab1"
    assert a.team_tag(1, 10) == "referee-lab1-team-1:v10" == image_tag(1, 10, a)
    assert a.label == {"referee.instance": "lab1"} and a.label_filter == "referee.instance=lab1"
    assert a.container_prefix == "referee-lab1-"
    names = {a.base_tag, a.sdk_tag, a.node_base_tag, a.team_tag(1, 10), a.bot_tag("greedy")}
    assert names.isdisjoint({b.base_tag, b.sdk_tag, b.node_base_tag, b.team_tag(1, 10), b.bot_tag("greedy")})
    assert all(a.owns_tag(t) and not b.owns_tag(t) for t in names)
    assert not a.owns_tag("referee-base:local") and not a.owns_tag("greedy:lab1")


@pytest.mark.parametrize("bad", ["", "Lab", "a-b", "a:b", "a/b", "x" * 21, "référé"])
def test_a_bad_id_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not an instance id"):
        Instance(bad)


def test_the_cli_default_is_per_user_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REFEREE_INSTANCE", raising=False)
    assert I.default_instance_id() == f"u{os.getuid()}"
    monkeypatch.setenv("REFEREE_INSTANCE", "ci7")
    assert I.default_instance_id() == "ci7"
    monkeypatch.setenv("REFEREE_INSTANCE", "No Good")
    with pytest.raises(ValueError):
        I.default_instance_id()


def test_the_instance_option_sets_the_process_instance(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    before = I.current()
    try:
        r = CliRunner().invoke(main, ["--instance", "lab9", "standings", "--help"])
        assert r.exit_code == 0, r.output
        assert I.current().id == "lab9"
        assert I.current().pins_file == tmp_path / "referee" / "instance-lab9.json"
        bad = CliRunner().invoke(main, ["--instance", "BAD", "standings", "--help"])
        assert bad.exit_code == 2 and "not an instance id" in bad.output
    finally:
        I.use(before)


def test_pins_are_kept_and_merged(tmp_path: Path) -> None:
    pins = tmp_path / "pins.json"
    one, two = Instance("p1", pins_file=pins), Instance("p1", pins_file=pins)
    one.pin("referee-base:p1", "sha256:" + "a" * 64)
    two.pin("referee-sdk-python:p1", "sha256:" + "b" * 64)  # another process of the same instance
    again = Instance("p1", pins_file=pins)
    assert again.pinned("referee-base:p1") == "sha256:" + "a" * 64
    assert again.pinned("referee-sdk-python:p1") == "sha256:" + "b" * 64
    assert pins.stat().st_mode & 0o077 == 0
    assert Instance("p1").pinned("referee-base:p1") is None  # no file: this process only


def test_the_service_keeps_its_id_in_its_database(tmp_path: Path) -> None:
    db = ServiceDB(tmp_path / "a.sqlite")
    try:
        first = service_instance(db)
        assert first.id == db.instance_id()  # made once, then read
        assert first.pins_file == db.data_dir / "instance-images.json"
    finally:
        db.close()
    db = ServiceDB(tmp_path / "a.sqlite")
    try:
        assert db.instance_id() == first.id
    finally:
        db.close()
    other = ServiceDB(tmp_path / "b.sqlite")
    try:
        assert other.instance_id() != first.id
    finally:
        other.close()
