"""Strict loading of configuration tables from TOML files.

:func:`load_toml_struct` reads one table of a TOML file into a msgspec Struct
and refuses what a lenient decoder would let through: a key the Struct does
not have (at any depth: ``[rules.deck]`` included) is an error naming the key,
with the closest known key suggested, even when the Struct itself accepts
unknown fields (the wire Structs do, for forward compatibility of bots)::

    rules.toml: [rules] unknown key 'play_for_place' (did you mean 'play_for_places'?)
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi

__all__ = [
    "MAX_NESTING",
    "TOO_DEEP",
    "ConfigError",
    "find_unknown_key",
    "load_toml_struct",
    "nesting",
    "toml_struct",
    "too_deep",
]

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the file and the key."""


def load_toml_struct(
    path: str | os.PathLike[str], table: str | None, type_: type[T], *, required: bool = True
) -> T:
    """Read table `table` (dotted for nested tables; None for the whole file) of
    the TOML file `path` as a `type_`.

    A missing table is an error when `required`, else gives ``type_()`` (its
    defaults). Raises :class:`ConfigError` naming the file, the table and the
    key for unreadable files, invalid TOML, unknown keys and wrong values.
    """
    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            document = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"{name}: cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{name}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib recurses once per level of [ or {
        raise ConfigError(f"{name}: {TOO_DEEP}") from None
    depth = nesting(document)
    if depth > MAX_NESTING:
        raise ConfigError(f"{name}: {too_deep(depth)}")
    return toml_struct(document, table, type_, source=name, required=required)


def toml_struct(
    document: dict[str, Any],
    table: str | None,
    type_: type[T],
    *,
    source: str = "<toml>",
    required: bool = True,
) -> T:
    """As :func:`load_toml_struct`, for a document already parsed with ``tomllib``."""
    data: Any = document
    if table:
        for part in table.split("."):
            if not isinstance(data, dict) or part not in data:
                if required:
                    raise ConfigError(f"{source}: no [{table}] table")
                return type_()
            data = data[part]
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: '{table}' must be a table ([{table}])")
    label = f"[{table}] " if table else ""
    unknown = find_unknown_key(data, type_)
    if unknown is not None:
        path, key, known = unknown
        inside = f"[{'.'.join(filter(None, [table or '', *path]))}] " if path else label
        hint = difflib.get_close_matches(key, known, n=1)
        more = f" (did you mean '{hint[0]}'?)" if hint else f" (known keys: {', '.join(known)})"
        raise ConfigError(f"{source}: {inside}unknown key '{key}'{more}")
    try:
        return msgspec.convert(data, type_)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{source}: {label}{_reword(str(e))}") from None


def _reword(message: str) -> str:
    """msgspec's "... - at `$.deck.copies`" as "'deck.copies': ..."."""
    match = re.search(r" - at `\$\.?([^`]*)`$", message)
    if not match:
        return message
    key = match.group(1)
    text = message[: match.start()]
    return f"'{key}': {text}" if key else text


def _unwrap(info: mi.Type) -> mi.Type:
    while isinstance(info, mi.Metadata):
        info = info.type
    return info


def find_unknown_key(value: Any, type_: Any) -> tuple[list[str], str, list[str]] | None:
    """The first key of `value` (plain TOML/JSON data) that `type_` does not
    have: (path of tables, key, known keys), or None."""
    return _find(value, _unwrap(mi.type_info(type_)), [])


def _find(value: Any, info: mi.Type, path: list[str]) -> tuple[list[str], str, list[str]] | None:
    info = _unwrap(info)
    if isinstance(info, mi.StructType | mi.TypedDictType | mi.DataclassType) and isinstance(value, dict):
        fields = {f.encode_name: f for f in info.fields}
        if isinstance(info, mi.StructType) and info.tag_field is not None:
            fields_known = [info.tag_field, *fields]
        else:
            fields_known = list(fields)
        for key in value:
            if key not in fields_known:
                return path, str(key), fields_known
        for key, item in value.items():
            field = fields.get(key)
            if field is not None:
                found = _find(item, field.type, [*path, str(key)])
                if found is not None:
                    return found
        return None
    if isinstance(info, mi.UnionType):
        for option in info.types:
            option = _unwrap(option)
            if isinstance(value, dict) and isinstance(
                option, mi.StructType | mi.TypedDictType | mi.DataclassType | mi.DictType
            ):
                return _find(value, option, path)
            if isinstance(value, list) and isinstance(option, mi.ListType | mi.TupleType):
                return _find(value, option, path)
        return None
    sequence = mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType
    if isinstance(info, sequence) and isinstance(value, list):
        for i, item in enumerate(value):
            found = _find(item, info.item_type, [*path, str(i)])
            if found is not None:
                return found
        return None
    if isinstance(info, mi.DictType) and isinstance(value, dict):
        for key, item in value.items():
            found = _find(item, info.value_type, [*path, str(key)])
            if found is not None:
                return found
    return None


# ------------------------------------------------------------ nesting


#: Levels of tables and arrays a configuration file may nest (a league needs
#: 3: ``[[bots]]``, its ``limits``, a value). Deeper data is refused before
#: any code walks it recursively.
MAX_NESTING = 32
#: What is wrong with a file nested deeper than ``tomllib`` can parse
#: (it raises ``RecursionError`` past a few hundred ``[`` or ``{``).
TOO_DEEP = (
    f"nested too deeply: its arrays or inline tables go hundreds of levels deep, at most {MAX_NESTING} "
    "levels are read (a configuration needs a few)"
)


def too_deep(depth: int) -> str:
    return f"nested too deeply: {depth} levels of tables and arrays, at most {MAX_NESTING}"


def nesting(value: Any) -> int:
    """How many levels of tables and arrays `value` (parsed TOML or JSON)
    nests, counted without recursion (so that any depth is measured)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest
