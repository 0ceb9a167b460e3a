"""referee.config.load_toml_struct: strict TOML tables."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from protocol import Deck, Rules, Timeouts
from referee.config import ConfigError, load_toml_struct
from referee.record import FaultPolicy


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "conf.toml"
    path.write_text(text)
    return path


def test_reads_a_table(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "[rules]\nplay_for_places = true\nturn_limit = 200\n[rules.deck]\ncolours = 'RGB'\ncopies = 2\n"
        "[timeouts]\nmove_ms = 50\n[faults]\nstrikes = 5\n",
    )
    rules = load_toml_struct(path, "rules", Rules)
    assert rules == Rules(play_for_places=True, turn_limit=200, deck=Deck(colours="RGB", copies=2))
    assert load_toml_struct(path, "timeouts", Timeouts) == Timeouts(move_ms=50)
    assert load_toml_struct(path, "faults", FaultPolicy) == FaultPolicy(strikes=5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[rules]\nplay_for_place = true\n",
            "[rules] unknown key 'play_for_place' (did you mean 'play_for_places'?)",
        ),
        ("[rules]\n[rules.deck]\ncopie = 2\n", "[rules.deck] unknown key 'copie' (did you mean 'copies'?)"),
        ("[rules]\nzzz = 1\n", "[rules] unknown key 'zzz' (known keys: deck, play_for_places,"),
        ("[rules]\nscoring = 'yes'\n", "[rules] 'scoring': Expected `bool`, got `str`"),
        ("[rules]\ndeck = 3\n", "[rules] 'deck': Expected `str | object`, got `int`"),
        ("[rules.deck]\ncopies = 'x'\n", "[rules] 'deck.copies': Expected `int`, got `str`"),
        ("[other]\nx = 1\n", "no [rules] table"),
        ("rules = 3\n", "'rules' must be a table"),
        ("[rules\n", "not valid TOML"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_toml_struct(path, "rules", Rules)
    assert message in str(err.value)
    assert str(err.value).startswith(str(path))


def test_optional_table_and_missing_file(tmp_path: Path) -> None:
    path = _file(tmp_path, "[other]\n")
    assert load_toml_struct(path, "rules", Rules, required=False) == Rules()
    with pytest.raises(ConfigError, match="cannot read"):
        load_toml_struct(tmp_path / "nope.toml", "rules", Rules)


class Inner(msgspec.Struct):
    n: int = 0


class Outer(msgspec.Struct):
    inner: Inner = msgspec.field(default_factory=Inner)
    items: list[Inner] = msgspec.field(default_factory=list)


def test_whole_file_and_nested_tables(tmp_path: Path) -> None:
    path = _file(tmp_path, "[inner]\nn = 2\n[[items]]\nn = 3\n[[items]]\nm = 4\n")
    with pytest.raises(ConfigError, match=r"\[items.1\] unknown key 'm' \(known keys: n\)"):
        load_toml_struct(path, None, Outer)
    path = _file(tmp_path, "[a.b]\nn = 5\n")
    assert load_toml_struct(path, "a.b", Inner) == Inner(n=5)
