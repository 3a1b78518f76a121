"""Byte sizes and bandwidths written with units, as the command line takes them.

Sizes: a plain number is bytes (``16e9``, ``17179869184``); a number with a unit is scaled by
it: decimal ``kB``/``KB``, ``MB``, ``GB``, ``TB`` (powers of 1000) or binary ``KiB``, ``MiB``,
``GiB``, ``TiB`` (powers of 1024), ``B`` alone is bytes. A space between number and unit is
allowed and the prefix letter may be of either case, but the ``B`` must be upper case: ``Gb``
reads as gigabits, which is refused rather than guessed. ``inf``, ``none`` and ``unlimited``
mean no limit (:data:`UNLIMITED`, ``math.inf``).

Bandwidths: a size per time, ``25GB/s``, ``25GiB/s``, ``100MB/ms``; a plain number is bytes per
*time unit of the input* (bytes/ms for the workload files, whose times are in ms; bytes/s for
the Piper files) and is returned unchanged. A value with a unit is converted to bytes per time
unit of the input, given by ``time_unit_s`` (the input's time unit in seconds: ``1e-3`` for ms).

Every error is an :class:`~stagecut.errors.InvalidArgumentError` naming the flag.

Examples
--------
>>> parse_bytes("16GiB") == 16 * 2**30 == parse_bytes("17179869184")
True
>>> parse_bytes("512MB"), parse_bytes("16e9"), parse_bytes("1.5 KiB")
(512000000.0, 16000000000.0, 1536.0)
>>> parse_bytes("inf")
inf
>>> parse_bandwidth("25GB/s")
25000000000.0
>>> parse_bandwidth("25GiB/s", time_unit_s=1e-3)  # bytes per ms
26843545.6
>>> parse_bandwidth("1e8", time_unit_s=1e-3)        # a plain number is already per time unit
100000000.0
>>> parse_bytes("16Gb", flag="--memory")
Traceback (most recent call last):
...
stagecut.errors.InvalidArgumentError: --memory: '16Gb' looks like bits; write bytes (e.g. 16GB or 16GiB)
>>> parse_bandwidth("25GB", flag="--bandwidth")
Traceback (most recent call last):
...
stagecut.errors.InvalidArgumentError: --bandwidth: '25GB' is a size, not a bandwidth: add a time (e.g. 25GB/s)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.validate import shown

__all__ = ["UNLIMITED", "parse_bytes", "parse_bandwidth", "format_bytes", "format_number", "bytes_text", "size_unit",
           "rate_unit", "pick_size_unit", "Display", "BYTE_UNITS", "TIME_UNITS"]

#: "no limit" (``inf``, ``none``, ``unlimited`` on the command line)
UNLIMITED = math.inf

#: multiplier of each size unit (the prefix letter is matched case-insensitively)
BYTE_UNITS: dict[str, float] = {
    "": 1.0, "b": 1.0,
    "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
    "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30, "tib": 2.0**40,
}
#: seconds in each time unit a bandwidth may be given per
TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6}

_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_SIZE = re.compile(rf"\s*({_NUMBER})\s*([A-Za-z]*)\s*")
_RATE = re.compile(rf"\s*({_NUMBER})\s*([A-Za-z]*)\s*/\s*([A-Za-z]+)\s*")
_NO_LIMIT = ("inf", "none", "unlimited")


def _unit(text: str, unit: str, flag: str) -> float:
    key = unit.lower()
    if key not in BYTE_UNITS:
        units = "B, kB, MB, GB, TB, KiB, MiB, GiB, TiB"
        raise InvalidArgumentError(f"{flag}: unknown unit {unit!r} in {text!r} (use {units})")
    if unit.endswith("b") and key != "b":
        p = unit[0].upper()
        dec, binary = (text.strip().replace(unit, p + u, 1) for u in ("B", "iB"))
        raise InvalidArgumentError(f"{flag}: {text!r} looks like bits; write bytes (e.g. {dec} or {binary})")
    return BYTE_UNITS[key]


def _check(value: float, text: str, flag: str) -> float:
    if math.isnan(value) or value < 0:
        raise InvalidArgumentError(f"{flag}: {shown(text)} must be a non-negative amount")
    if math.isinf(value):
        raise InvalidArgumentError(f"{flag}: {shown(text)} is not finite")
    return value


def _float(value: int | float, flag: str) -> float:
    try:
        return float(value)
    except OverflowError:  # an int of hundreds of digits
        raise InvalidArgumentError(f"{flag}: {shown(value)} is too large") from None


def parse_bytes(text: str | float, *, flag: str = "memory", allow_unlimited: bool = True) -> float:
    """Bytes in ``text`` (``"16GiB"``, ``"512MB"``, ``"16e9"``); ``inf``/``none``/``unlimited``
    give :data:`UNLIMITED` when ``allow_unlimited``.

    Raises
    ------
    InvalidArgumentError
        Not a number with a known size unit, negative, or bits (``Gb``); names ``flag``.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _check(_float(text, flag), shown(text), flag)
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{flag}: {text!r} is not a size")
    if text.strip().lower() in _NO_LIMIT:
        if not allow_unlimited:
            raise InvalidArgumentError(f"{flag}: needs a finite size, got {text!r}")
        return UNLIMITED
    m = _SIZE.fullmatch(text)
    if m is None:
        if "/" in text:
            raise InvalidArgumentError(f"{flag}: {text!r} is a bandwidth, not a size (e.g. 16GiB)")
        raise InvalidArgumentError(f"{flag}: {text!r} is not a size (e.g. 16GiB, 512MB, 16e9)")
    return _check(float(m.group(1)) * _unit(text, m.group(2), flag), text, flag)


def parse_bandwidth(text: str | float, *, flag: str = "bandwidth", time_unit_s: float = 1.0) -> float:
    """Bytes per time unit of the input in ``text``: ``"25GB/s"``, ``"25GiB/s"``, ``"100MB/ms"``
    are converted with ``time_unit_s`` (the input's time unit in seconds); a plain number is
    taken as bytes per time unit of the input already.

    Raises
    ------
    InvalidArgumentError
        Not a number, a size without a time, an unknown unit, zero or negative; names ``flag``.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, given = _float(text, flag), shown(text)
    elif isinstance(text, str):
        given = text
        m = _RATE.fullmatch(text)
        if m is not None:
            per = m.group(3).lower()
            if per not in TIME_UNITS:
                raise InvalidArgumentError(f"{flag}: unknown time unit {m.group(3)!r} in {text!r} "
                                           f"(use {', '.join(TIME_UNITS)})")
            value = float(m.group(1)) * _unit(text, m.group(2), flag) * time_unit_s / TIME_UNITS[per]
        else:
            m = _SIZE.fullmatch(text)
            if m is None:
                raise InvalidArgumentError(f"{flag}: {text!r} is not a bandwidth (e.g. 25GB/s, 25GiB/s)")
            if m.group(2):
                raise InvalidArgumentError(f"{flag}: {text!r} is a size, not a bandwidth: add a time "
                                           f"(e.g. {text.strip()}/s)")
            value = float(m.group(1))
    else:
        raise InvalidArgumentError(f"{flag}: {text!r} is not a bandwidth")
    _check(value, given, flag)
    if value == 0:
        raise InvalidArgumentError(f"{flag}: {given!r} must be positive")
    return value


def format_bytes(value: float | None) -> str:
    """A short human form: ``17179869184`` -> ``"16 GiB"``, ``1.5e9`` -> ``"1.5 GB"``.

    >>> format_bytes(16 * 2**30), format_bytes(1.5e9), format_bytes(512), format_bytes(math.inf)
    ('16 GiB', '1.5 GB', '512 B', 'unlimited')
    """
    if value is None or math.isinf(value):
        return "unlimited"
    for name, mult in (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if mult <= value < 1024 * mult and (value / mult) == round(value / mult, 2):
            return f"{value / mult:g} {name}"
    for name, mult in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= mult:
            return f"{value / mult:.4g} {name}"
    return f"{value:g} B"



def bytes_text(value: float) -> str:
    """A byte count in a message, in the binary unit that fits (so that two sizes compared in one
    message share a kind of unit), four significant digits; ``"N bytes"`` below 1 KiB.

    >>> bytes_text(7.5494e8), bytes_text(6.29146e8), bytes_text(6 * 2**30), bytes_text(6.0)
    ('720 MiB', '600 MiB', '6 GiB', '6 bytes')
    """
    if math.isinf(value):
        return format_bytes(value)
    unit = pick_size_unit([value])
    if unit == "B":
        return f"{value:g} bytes"
    return f"{value / BYTE_UNITS[unit.lower()]:.4g} {unit}"


#: the spelling of each size unit as printed (keys of :data:`BYTE_UNITS`)
_SIZE_NAMES = {"b": "B", "kb": "kB", "mb": "MB", "gb": "GB", "tb": "TB",
               "kib": "KiB", "mib": "MiB", "gib": "GiB", "tib": "TiB"}


def format_number(x: float | None, digits: int = 6) -> str:
    """A number as a person reads it: ``digits`` significant digits, never an exponent between
    1e-4 and 1e15 (``712704000.0`` -> ``"712704000"``, ``0.00390625`` -> ``"0.00390625"``,
    ``2.0`` -> ``"2"``); ``None`` -> ``"-"``.

    >>> format_number(7.12704e8), format_number(17.78991234), format_number(0.00390625), format_number(1e-9)
    ('712704000', '17.7899', '0.00390625', '1e-09')
    """
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    text = f"{x:.{digits}g}"
    if "e" in text and 1e-4 <= abs(x) < 1e15:
        text = f"{x:.0f}" if abs(x) >= 1 else f"{x:.{digits}f}".rstrip("0").rstrip(".")
    return text


def size_unit(text: str | None) -> str | None:
    """The unit a size was written with (``"2.5GiB"`` -> ``"GiB"``, ``"512 mb"`` -> ``"MB"``);
    ``None`` for a plain number of bytes, ``none``/``inf`` or anything unreadable.

    >>> size_unit("2.5GiB"), size_unit("512 MB"), size_unit("16e9"), size_unit("none")
    ('GiB', 'MB', None, None)
    """
    if not isinstance(text, str):
        return None
    m = _SIZE.fullmatch(text)
    if m is None or not m.group(2) or m.group(2).lower() not in _SIZE_NAMES or m.group(2).lower() == "b":
        return None
    return _SIZE_NAMES[m.group(2).lower()]


def rate_unit(text: str | None) -> str | None:
    """The unit a bandwidth was written with (``"25GiB/s"`` -> ``"GiB/s"``, ``"100 mb/ms"`` ->
    ``"MB/ms"``); ``None`` for a plain number or anything unreadable.

    >>> rate_unit("25GiB/s"), rate_unit("100 mb/ms"), rate_unit("1e8")
    ('GiB/s', 'MB/ms', None)
    """
    if not isinstance(text, str):
        return None
    m = _RATE.fullmatch(text)
    if m is None or m.group(2).lower() not in _SIZE_NAMES or m.group(3).lower() not in TIME_UNITS:
        return None
    return f"{_SIZE_NAMES[m.group(2).lower()]}/{m.group(3).lower()}"


def pick_size_unit(values: Iterable[float]) -> str:
    """The binary unit (``B``, ``KiB``, ``MiB``, ``GiB``, ``TiB``) that shows the largest finite
    value of ``values`` between 1 and 1024.

    >>> pick_size_unit([1.3e8, 5.5e8]), pick_size_unit([0.0]), pick_size_unit([3 * 2**30])
    ('MiB', 'B', 'GiB')
    """
    top = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    for name in ("TiB", "GiB", "MiB", "KiB"):
        if top >= BYTE_UNITS[name.lower()]:
            return name
    return "B"


@dataclass(frozen=True)
class Display:
    """How a result's numbers are printed (:meth:`stagecut.results.Result.summary` and
    :meth:`~stagecut.results.Result.table`): the units of the input, which the result itself
    does not carry.

    Parameters
    ----------
    time : str, optional
        The unit of the input's times, as printed beside every time (``"ms"`` for the workload
        files, ``"s"`` for Piper files, ``"µs"`` for operator graphs); ``None``: not known (no
        unit printed).
    memory : str, optional
        The unit to print sizes in (``"GiB"``, ``"MB"``: the one the user gave); ``None``: a
        binary unit chosen for the values (:func:`pick_size_unit`).
    bytes : bool
        Sizes are bytes (``False``: the input's own abstract unit, printed as it is).
    names : Mapping, optional
        ``{node id: name}`` in the graph's topological order, for graphs whose nodes have
        names: the stage table then names each stage's first and last node.
    bandwidth : str, optional
        The unit to print bandwidths in (``"GiB/s"``: the one the user gave); ``None``: GB/s,
        MB/s... whichever fits.

    Examples
    --------
    >>> d = Display(time="ms", memory="GiB")
    >>> d.time_label("load"), d.size_label(), d.size(1.5 * 2**30)
    ('load (ms)', 'memory (GiB)', '1.5')
    >>> Display(time="ms").size_label([5.2e8]), Display(time="ms").size(5.2e8, [5.2e8])
    ('memory (MiB)', '495.9')
    >>> d.size_text(2.5 * 2**30), Display().size_text(3e8), d.size_text(math.inf)
    ('2.5 GiB', '286.1 MiB', 'unlimited')
    >>> Display(time="ms").rate_text(1e7), Display(time="ms", bandwidth="GiB/s").rate_text(25 * 2**30 / 1e3)
    ('10 GB/s', '25 GiB/s')
    """

    time: str | None = None
    memory: str | None = None
    bytes: bool = True
    names: Mapping[Any, str] | None = None  # Any: Mapping is invariant in its key, and {str: str} must pass
    bandwidth: str | None = None

    def with_unit(self, value: float | None, digits: int = 6) -> str:
        """A time with its unit (``"17.7899 ms"``)."""
        text = format_number(value, digits)
        return text if self.time is None or value is None else f"{text} {self.time}"

    def time_label(self, name: str) -> str:
        """A column of times: ``"load (ms)"``."""
        return name if self.time is None else f"{name} ({self.time})"

    def _size_unit(self, values: Iterable[float]) -> str | None:
        if not self.bytes:
            return None
        return self.memory or pick_size_unit(values)

    def size_label(self, values: Iterable[float] = (), name: str = "memory") -> str:
        """A column of sizes: ``"memory (GiB)"`` (``values``: the column, to choose a unit)."""
        unit = self._size_unit(values)
        return f"{name} ({'units' if unit is None else unit})"

    def size(self, value: float | None, values: Iterable[float] = ()) -> str:
        """A size in the column's unit (``values``: the column), four significant digits."""
        if value is None or not math.isfinite(value):
            return format_number(value)
        unit = self._size_unit(values if values else (value,))
        if unit is None:
            return format_number(value)
        x = value / BYTE_UNITS[unit.lower()]
        return f"{x:.0f}" if abs(x) >= 1000 or x == 0 else format_number(x, 4)

    def size_text(self, value: float | None) -> str:
        """One size with its unit: in :attr:`memory` when given, else :func:`bytes_text`;
        ``"unlimited"`` for ``inf``."""
        if value is None or math.isinf(value):
            return "unlimited"
        if not self.bytes:
            return f"{format_number(value)} units"
        if self.memory is None:
            return bytes_text(value)
        return f"{format_number(value / BYTE_UNITS[self.memory.lower()], 4)} {self.memory}"

    def rate_text(self, value: float | None) -> str:
        """A bandwidth given in bytes per time unit of the input, with its unit: in
        :attr:`bandwidth` when given, else the decimal unit per second that fits (GB/s...)."""
        seconds = {"ms": 1e-3, "s": 1.0, "\u00b5s": 1e-6, "us": 1e-6}.get(self.time or "")
        if value is None:
            return "none"
        if seconds is None or not self.bytes:
            return f"{format_number(value)} per time unit"
        per_s = value / seconds
        if self.bandwidth is not None:
            size, _, per = self.bandwidth.partition("/")
            x = per_s * TIME_UNITS[per] / BYTE_UNITS[size.lower()]
            return f"{format_number(x, 4)} {self.bandwidth}"
        for name in ("TB", "GB", "MB", "kB"):
            if per_s >= BYTE_UNITS[name.lower()]:
                return f"{format_number(per_s / BYTE_UNITS[name.lower()], 4)} {name}/s"
        return f"{format_number(per_s, 4)} B/s"
