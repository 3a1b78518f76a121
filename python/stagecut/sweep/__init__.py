"""Planning sweeps: many planner calls (graphs x methods x device counts x memory sizes x seeds)
run on Dask, one Parquet row per call, and the summaries the papers tabulate.

* :mod:`stagecut.sweep.spec`: the sweep file (TOML) and its expansion into tasks;
* :mod:`stagecut.sweep.run`: :func:`run_sweep` (a ``LocalCluster`` by default, or an existing
  scheduler), resumable: a re-run does only what is missing or failed;
* :mod:`stagecut.sweep.table`: the results table (one part file per finished task);
* :mod:`stagecut.sweep.report`: :func:`summarize` and :func:`format_report`.

Importing this package does not import Dask or pyarrow (they are loaded when a sweep runs or a
table is read; ``pip install 'stagecut[sweep]'``).

Examples
--------
>>> from stagecut.sweep import expand, sweep_from_dict
>>> spec = sweep_from_dict({"graphs": ["regal:8", "regal:10"], "devices": [2, 4],
...                         "methods": ["dp", "dpl"]})
>>> len(expand(spec))
8
"""

from stagecut.sweep.report import FORMATS, SummaryRow, format_report, summarize
from stagecut.sweep.run import SweepRun, pending, run_sweep, run_task
from stagecut.sweep.spec import OBJECTIVES, MethodSpec, SweepSpec, Task, expand, read_sweep, sweep_from_dict
from stagecut.sweep.table import COLUMNS, read_results, write_row

__all__ = ["FORMATS", "SummaryRow", "format_report", "summarize", "SweepRun", "pending", "run_sweep", "run_task",
           "OBJECTIVES", "MethodSpec", "SweepSpec", "Task", "expand", "read_sweep", "sweep_from_dict", "COLUMNS",
           "read_results", "write_row"]
