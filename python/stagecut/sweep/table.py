"""The results table of a sweep: Parquet (pyarrow), one row per task.

The table is a directory holding one part file per finished task, ``part-<key>.parquet``, each
written to a temporary file and renamed into place: a sweep killed at any moment leaves every
finished task's row intact and no half-written part (a re-run of the task replaces its part).
:func:`read_results` reads the directory (or one Parquet file holding the same columns) back.

Columns (:data:`COLUMNS`): ``key`` (the task's hash), ``problem`` (the objective: throughput,
slice, latency), ``graph``, ``method``, ``options`` (JSON), ``devices``, ``memory``, ``seed``,
``time_limit``, ``objective`` (the answer's cost; null when none), ``lower_bound``, ``gap``,
``status`` (a result status, or ``"error"`` when the call raised: ``error`` says what),
``runtime_s``, ``peak_rss_mb`` (the worker process's peak resident memory during the task),
``worker`` (its address), ``error``, ``finished_at`` (Unix seconds), ``detail`` (JSON, or null:
for a certify task, ``{"bound_source": level, "levels": [[level, bound, status, seconds], ...]}``,
each level of the ladder with its bound, null for "no bound" and the string ``"inf"`` for a proven
infeasibility; a table written before this column existed reads as null here).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from stagecut.errors import BackendUnavailableError, InvalidArgumentError

__all__ = ["COLUMNS", "ERROR", "write_row", "read_results", "part_path"]

#: ``(name, type)`` of every column, in order (``str``, ``int``, ``float``; all nullable)
COLUMNS: tuple[tuple[str, type], ...] = (
    ("key", str), ("problem", str), ("graph", str), ("method", str), ("options", str), ("devices", int),
    ("memory", str), ("seed", int), ("time_limit", float), ("objective", float), ("lower_bound", float),
    ("gap", float), ("status", str), ("runtime_s", float), ("peak_rss_mb", float), ("worker", str),
    ("error", str), ("finished_at", float), ("detail", str),
)
#: Columns a part file written before they existed may lack (read as null).
_LATER = frozenset({"detail"})
#: the status of a task whose call raised
ERROR = "error"


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise BackendUnavailableError("the sweep results table needs pyarrow: pip install 'stagecut[sweep]'") from None
    return pa, pq


def _schema(pa: Any) -> Any:
    types = {str: pa.string(), int: pa.int64(), float: pa.float64()}
    return pa.schema([(name, types[tp]) for name, tp in COLUMNS])


def part_path(results: str, key: str) -> str:
    """The part file of task ``key`` in the results directory ``results``."""
    return os.path.join(results, f"part-{key}.parquet")


def _clean(row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, tp in COLUMNS:
        v = row.get(name)
        if tp is float and v is not None:
            v = float(v)
            if math.isnan(v):
                v = None
        out[name] = v
    return out


def write_row(results: str, row: Mapping[str, Any]) -> str:
    """Write one task's row as its part file, atomically (a temporary file renamed into place).

    Parameters
    ----------
    results : str
        The results directory (created when missing).
    row : mapping
        The columns of :data:`COLUMNS` (missing ones are null; ``key`` is required).

    Returns
    -------
    str
        The part file written.

    Raises
    ------
    InvalidArgumentError
        ``row`` has no ``key``.
    BackendUnavailableError
        pyarrow is not installed.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = write_row(d, {"key": "a1", "graph": "g", "devices": 2, "objective": 4.0, "status": "optimal"})
    >>> [(r["key"], r["devices"], r["objective"], r["lower_bound"]) for r in read_results(d)]
    [('a1', 2, 4.0, None)]
    """
    if not isinstance(row.get("key"), str) or not row["key"]:
        raise InvalidArgumentError("key: a results row needs the task's key")
    pa, pq = _pyarrow()
    os.makedirs(results, exist_ok=True)
    final = part_path(results, row["key"])
    tmp = os.path.join(results, f".tmp-{os.getpid()}-{row['key']}.parquet")
    table = pa.Table.from_pylist([_clean(row)], schema=_schema(pa))
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final


def read_results(path: str | os.PathLike[str], keys: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a results table, sorted by ``finished_at`` (a missing directory: no rows).

    Parameters
    ----------
    path : str or path-like
        A results directory of part files, or one Parquet file with the same columns.
    keys : sequence of str, optional
        Only these tasks' rows.

    Returns
    -------
    list of dict
        One dict per row (the columns of :data:`COLUMNS`); when a key appears more than once
        (a single file holding two runs of a task), the last finished row.

    Raises
    ------
    InvalidArgumentError
        ``path`` is neither a directory nor a Parquet file, or a part lacks a column (named).
    BackendUnavailableError
        pyarrow is not installed.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> read_results(d + "/none")
    []
    """
    pa, pq = _pyarrow()
    path = os.fspath(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.startswith("part-") and f.endswith(".parquet"))
        if keys is not None:
            wanted = {os.path.basename(part_path(path, k)) for k in keys}
            files = [f for f in files if os.path.basename(f) in wanted]
    elif os.path.isfile(path):
        files = [path]
    elif not os.path.exists(path):
        return []
    else:
        raise InvalidArgumentError(f"results: {path} is neither a directory nor a Parquet file")
    rows: dict[str, dict[str, Any]] = {}
    for f in files:
        try:
            table = pq.read_table(f)
        except (pa.ArrowException, OSError) as e:
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise InvalidArgumentError(f"results: {f}: not a Parquet results table ({why})") from None
        missing = [name for name, _ in COLUMNS if name not in table.column_names and name not in _LATER]
        if missing:
            raise InvalidArgumentError(f"results: {f}: no column {missing[0]!r} (not a sweep results table)")
        present = [name for name, _ in COLUMNS if name in table.column_names]
        for r in table.select(present).to_pylist():
            r.update({name: None for name in _LATER if name not in r})
            old = rows.get(r["key"])
            if old is None or (r["finished_at"] or 0.0) >= (old["finished_at"] or 0.0):
                rows[r["key"]] = r
    want = None if keys is None else set(keys)
    out = [r for r in rows.values() if want is None or r["key"] in want]
    return sorted(out, key=lambda r: (r["finished_at"] or 0.0, r["key"]))
