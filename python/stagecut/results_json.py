"""The JSON codec of the result protocol (:mod:`stagecut.results`): a result's fields to JSON-safe
values (non-finite floats as strings, tuples and sets as lists, dataclasses as dicts, any mapping
key as a string that reads back as itself) and back, guided by the dataclass's type hints, with an
:class:`~stagecut.errors.InvalidGraphError` naming the field for a value of the wrong kind."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Hashable, Mapping
from typing import Any, Literal, Union, get_args, get_origin

from stagecut.errors import InvalidGraphError


def _encode(value: Any) -> Any:
    """A JSON-safe form: non-finite floats as strings, tuples/sets as lists, dataclasses as dicts."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
    if isinstance(value, Mapping):
        return {_encode_key(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_encode(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _encode(value.item())
    if hasattr(value, "tolist"):  # numpy arrays
        return _encode(value.tolist())
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _encode_key(k: Any) -> str:
    """A mapping key as a JSON object key: a string stays itself unless it reads as JSON (``"7"``,
    ``"null"``, ``'"x"'``), which is quoted; any other key is its JSON text (``7`` -> ``"7"``)."""
    if isinstance(k, str):
        try:
            json.loads(k)
        except ValueError:
            return k
    return json.dumps(_encode(k))


def _decode_key(k: str) -> Any:
    """Inverse of :func:`_encode_key`."""
    try:
        v = json.loads(k)
    except ValueError:
        return k
    return _tuples(v)


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def _decode(tp: Any, value: Any, where: str) -> Any:
    """Inverse of :func:`_encode` guided by the type hint ``tp``."""
    if tp is Any or tp is object:
        return value
    origin = get_origin(tp)
    if origin is Literal:
        return value
    if origin is Union or origin is types.UnionType:
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _decode(non_none[0], value, where)
        for a in non_none:  # a scalar union such as Stat: keep the JSON value, restore floats
            if a is float and isinstance(value, str) and value in ("inf", "-inf", "nan"):
                return float(value)
        return value
    if tp is float:
        if isinstance(value, str):
            if value not in ("inf", "-inf", "nan", "Infinity", "-Infinity", "NaN"):
                raise InvalidGraphError(f"{where}: expected a number, got {_short(value)}")
            return float(value)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise InvalidGraphError(f"{where}: expected a number, got {_short(value)}")
        try:
            return float(value)
        except OverflowError:
            raise InvalidGraphError(f"{where}: {_short(value)} is too large for a number") from None
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidGraphError(f"{where}: expected an integer, got {_short(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise InvalidGraphError(f"{where}: expected a string, got {_short(value)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise InvalidGraphError(f"{where}: expected true or false, got {_short(value)}")
        return value
    if tp is Hashable:
        if not _is_node_id(value):
            raise InvalidGraphError(f"{where}: expected a node id (an integer, a string or a list of them), "
                                    f"got {_short(value)}")
        return _tuples(value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise InvalidGraphError(f"{where}: expected a list, got {_short(value)}")
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise InvalidGraphError(f"{where}: expected a list of {len(args)}, got {len(value)} items")
        return tuple(_decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise InvalidGraphError(f"{where}: expected an object, got {_short(value)}")
        args = get_args(tp) or (Any, Any)
        return {(_decode_key(k) if args[0] is not str else k): _decode(args[1], v, f"{where}[{k!r}]")
                for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _from_dict(tp, value, where)
    return value


def _short(value: Any) -> str:
    """``repr`` of a value from a file, cut to 60 characters."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an integer too long to print, nesting too deep
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _is_node_id(value: Any, depth: int = 0) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, str)):
        return True
    return isinstance(value, list) and depth < 8 and all(_is_node_id(v, depth + 1) for v in value)


def _from_dict(cls: Any, data: Mapping[str, Any], where: str) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidGraphError(f"{where}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InvalidGraphError(f"{where}: missing field {f.name!r}")
            continue
        kwargs[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
    return cls(**kwargs)
