"""The registry's and the node cache's rules that need no daemon: which images
a full cache removes, what a registry address is, what tells two seats apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from referee.bots.cluster.nodepool import ImageSeat, seat_of
from referee.bots.cluster.registry import PinnedImage, check_registry, lru_victims
from referee.bots.sandbox.container_limits import ContainerLimits
from referee.cli import main

MB = 1024**2


def test_a_full_cache_removes_the_least_recently_used_until_it_fits() -> None:
    entries = {"a": (100 * MB, 1.0), "b": (100 * MB, 3.0), "c": (100 * MB, 2.0)}
    assert lru_victims(entries, 300 * MB) == []
    assert lru_victims(entries, 250 * MB) == ["a"]
    assert lru_victims(entries, 150 * MB) == ["a", "c"]
    # what is in use (or was just pulled) stays, even past the cap
    assert lru_victims(entries, 150 * MB, keep={"a"}) == ["c", "b"]
    assert lru_victims(entries, 0, keep={"a", "b", "c"}) == []


@pytest.mark.parametrize("text", ["127.0.0.1:5000", "registry.school.example:443", "[::1]:5000", " reg:1 "])
def test_a_registry_is_host_and_port(text: str) -> None:
    assert check_registry(text) == text.strip()


@pytest.mark.parametrize("text", ["127.0.0.1", "http://127.0.0.1:5000", "reg:0", "reg:70000", "a b:1", ""])
def test_anything_else_is_refused_saying_what_a_registry_looks_like(text: str) -> None:
    with pytest.raises(ValueError, match="expected HOST:PORT of a Docker registry"):
        check_registry(text)


def seat(**changes: object) -> ImageSeat:
    fields: dict[str, object] = {
        "limits": ContainerLimits(),
        "secret": None,
        "command": None,
        "env": {},
        "labels": {},
        "fresh": False,
        "instance": "t1",
        "out_dir": "/runs/a",
    }
    fields.update(changes)
    image = fields.pop("image", PinnedImage(image_id="sha256:" + "1" * 64, ref=None))
    return seat_of("bot", image, **fields)  # type: ignore[arg-type]


def test_a_seat_is_told_apart_by_every_field_its_container_depends_on() -> None:
    assert seat().key == seat().key
    others = [
        seat(image=PinnedImage(image_id="sha256:" + "2" * 64)),
        seat(secret="s"),
        seat(env={"A": "1"}),
        seat(limits=ContainerLimits(memory="64m")),
        seat(command=["python", "x"]),
        seat(out_dir="/runs/b"),
        seat(fresh=True),
    ]
    assert len({s.key for s in others} | {seat().key}) == len(others) + 1


def test_the_runtime_a_seat_runs_under_is_the_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFEREE_CONTAINER_RUNTIME", "runsc")
    assert seat().limits.runtime == "runsc"
    monkeypatch.delenv("REFEREE_CONTAINER_RUNTIME")
    assert seat(limits=ContainerLimits(runtime="kata")).limits.runtime == "kata"


def test_the_cli_refuses_a_bad_registry_and_one_without_ray(tmp_path: Path) -> None:
    league = tmp_path / "league.toml"
    league.write_text(
        '[tournament]\nname = "x"\n\n[[bots]]\nname = "a"\nurl = "http://127.0.0.1:9"\n\n'
        '[[bots]]\nname = "b"\nurl = "http://127.0.0.1:9"\n'
    )
    r = CliRunner().invoke(main, ["tournament", str(league), "--registry", "127.0.0.1:5000"])
    assert r.exit_code != 0 and "a registry serves the nodes of --executor ray only" in r.output
    r = CliRunner().invoke(
        main, ["tournament", str(league), "--executor", "ray", "--registry", "http://reg:5000"]
    )
    assert r.exit_code == 2 and "--registry: expected HOST:PORT" in r.output, r.output
    # referee serve: the same two refusals, from the same options, before anything starts.
    db = tmp_path / "service.sqlite"
    r = CliRunner().invoke(main, ["serve", "--db", str(db), "--registry", "127.0.0.1:5000"])
    assert r.exit_code == 2 and "a registry serves the nodes of --executor ray only" in r.output, r.output
    r = CliRunner().invoke(
        main, ["serve", "--db", str(db), "--executor", "ray", "--registry", "http://reg:5000"]
    )
    assert r.exit_code == 2 and "--registry: expected HOST:PORT" in r.output, r.output
    assert not db.exists()
