"""``stagecut sweep SWEEP.toml``: run many planner calls on Dask and tabulate them.

    stagecut sweep SWEEP.toml [--workers N | --scheduler tcp://HOST:PORT] [--results DIR] [--quiet]
                              [--baseline METHOD] [--format markdown|csv]
    stagecut sweep --report TABLE [--baseline METHOD] [--format markdown|csv]

A sweep file (TOML) names graphs (files and globs relative to it, example:NAME, regal:...,
rwnn:...), an objective (throughput, slice, latency, or certify: MTPP lower bounds, each method
a level of the ladder certifying a slice_graph plan), methods with their options, device counts,
memory sizes, time limits and seeds; every combination is one task. The tasks run on an
in-process Dask LocalCluster of worker processes (--workers, default the cores), or on a running
scheduler (--scheduler). Each finished task is saved at once as a row of the results table (a
directory of Parquet parts, default SWEEP.results beside the file); running the same sweep again
runs only the tasks missing from it or failed. Ctrl-C stops the sweep with the table intact
(exit 130).

At the end (and with --report TABLE for a saved table) the summary per device count: the
geometric means of bound/answer and answer/baseline, the share proven optimal and the runtime
quantiles, over all methods (the best answer of each instance) and per method.

Example sweep file:

    objective = "throughput"
    graphs = ["../shared/workloads/throughput-inputs/LayerGraphs/*.json"]
    devices = [2, 4, 6, 8]
    time_limit = 600

    [[methods]]
    name = "dp"

    [[methods]]
    name = "ip"
    time_limit = 60
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stagecut.cli import _common
from stagecut.cli._plot import add_plot

__all__ = ["add_parser", "run", "progress_line"]


def progress_line(row: dict[str, Any], done: int, total: int) -> str:
    """One finished task on stderr: its place, the task (the graph, k, and the memory, seed,
    time limit and options when the sweep sets them, so that no two tasks print alike), its
    status and objective (in the graph's own time unit) and the call's runtime.

    >>> progress_line({"graph": "example:chain", "devices": 2, "method": "dp", "memory": "file", "seed": 0,
    ...                "time_limit": None, "options": "{}", "status": "optimal", "objective": 10.5,
    ...                "runtime_s": 0.012}, 1, 8)
    '[1/8] example:chain k=2 dp: optimal, objective 10.5, in 0.01 s'
    >>> progress_line({"graph": "g.json", "devices": 4, "method": "ip", "memory": "2GiB", "seed": 1,
    ...                "time_limit": 60.0, "options": '{"solver": "highs"}', "status": "infeasible",
    ...                "objective": None, "runtime_s": 3.0}, 2, 8)
    '[2/8] g.json k=4 memory=2GiB seed=1 time_limit=60 s ip {"solver": "highs"}: infeasible, in 3.00 s'
    """
    task = [str(row["graph"]), f"k={row['devices']}"]
    if row.get("memory") not in (None, "file"):
        task.append(f"memory={row['memory']}")
    if row.get("seed"):
        task.append(f"seed={row['seed']}")
    if row.get("time_limit") is not None:
        task.append(f"time_limit={row['time_limit']:g} s")
    task.append(str(row["method"]))
    if row.get("options") not in (None, "", "{}"):
        task.append(str(row["options"]))
    if row["status"] == "error":
        what = f"error: {row['error']}"
    else:
        what = str(row["status"]) + ("" if row.get("objective") is None else f", objective {row['objective']:.6g}")
    return f"[{done}/{total}] {' '.join(task)}: {what}, in {row.get('runtime_s') or 0.0:.2f} s"


def _progress(total: int, skipped: int) -> Any:
    count = [skipped]  # the tasks already in the table count as done

    def show(row: dict[str, Any]) -> None:
        count[0] += 1
        print(progress_line(row, count[0], total), file=sys.stderr, flush=True)

    return show


@_common.guarded
def run(args: argparse.Namespace) -> int:
    from stagecut.sweep import expand, format_report, read_results, read_sweep, summarize
    from stagecut.sweep.run import pending, run_sweep
    from stagecut.sweep.spec import check_spec

    if (args.sweep is None) == (args.report is None):
        raise _common.bad_argument("SWEEP.toml", "give a sweep file to run, or --report TABLE (not both)")
    if args.report is not None:
        _common.requires(args, False, "a sweep file", (("workers", "--workers"), ("scheduler", "--scheduler"),
                                                       ("results", "--results"), ("quiet", "--quiet")))
        rows = read_results(args.report)
        if not rows:
            raise _common.bad_argument("--report", f"{args.report}: no results table there")
        summary = summarize(rows, args.baseline)
        print(format_report(summary, args.format, args.baseline), end="")
        if args.plot:
            _draw(summary, args.plot)
        return _common.EXIT_OK
    if args.workers is not None and args.scheduler is not None:
        raise _common.bad_argument("--workers", "sets the local cluster's size; not with --scheduler")
    spec = read_sweep(args.sweep)
    check_spec(spec)  # methods, options, graph specs and the task count, before any cluster starts
    results = args.results or spec.results
    todo, skipped = pending(spec, results)
    total = skipped + len(todo)
    if not args.quiet:
        where = f"to run on {args.scheduler or 'a local cluster'}" if todo else "nothing to run"
        print(f"stagecut: sweep: {total} tasks, {skipped} already in {results}, {len(todo)} {where}",
              file=sys.stderr, flush=True)
    try:
        out = run_sweep(spec, results=results, workers=args.workers, scheduler=args.scheduler,
                        on_row=None if args.quiet else _progress(total, skipped))
    except KeyboardInterrupt:
        saved = total - len(pending(spec, results)[0])
        print(f"stagecut: interrupted: {saved} of {total} tasks are saved in {results}; run the same command "
              "again to run the rest", file=sys.stderr)
        return _common.EXIT_INTERRUPTED
    rows = read_results(results, keys=None)
    keys = {t.key for t in expand(spec)}
    rows = [r for r in rows if r["key"] in keys]
    print(format_report(summarize(rows, args.baseline or spec.baseline), args.format,
                        args.baseline or spec.baseline or spec.methods[0].name), end="")
    if not args.quiet:
        print(f"stagecut: sweep: ran {len(out.ran)} tasks ({out.errors} errors), skipped {out.skipped}; "
              f"table {results}", file=sys.stderr)
    failed = len(pending(spec, results)[0])  # tasks with no row but an error row
    if failed:
        print(f"stagecut: error: {failed} of {total} tasks failed (their rows in {results} say why; fix the "
              "sweep and run it again to redo them)", file=sys.stderr)
        return _common.EXIT_USAGE
    return _common.EXIT_OK


def _draw(summary: Any, path: str) -> None:
    """``--plot``: the summary's figure, written atomically."""
    import matplotlib.pyplot as plt

    from stagecut.plot import savefig
    from stagecut.sweep.plot import plot_summary

    fig = plot_summary(summary)
    try:
        savefig(fig, path)
    finally:
        plt.close(fig)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "sweep", help="run a sweep of planner calls on Dask (graphs x methods x K x memory x seeds) and tabulate it",
        description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep", nargs="?", metavar="SWEEP.toml", default=None, help="the sweep file to run")
    p.add_argument("--report", metavar="TABLE", default=None,
                   help="summarize a saved results table (a results directory or a Parquet file) instead of running "
                        "a sweep (default: run SWEEP.toml)")
    p.add_argument("--workers", type=_common.positive_int, default=None, metavar="N",
                   help="worker processes of the local Dask cluster, one thread each (default: the sweep "
                        "file's workers, else the cores)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on the Dask scheduler at ADDRESS (tcp://HOST:PORT) (default: an in-process local cluster)")
    p.add_argument("--results", metavar="DIR", default=None,
                   help="the results table (default: the sweep file's results, else SWEEP.results beside it)")
    p.add_argument("--baseline", metavar="METHOD", default=None,
                   help="the method answers are compared with (default: the sweep file's [report] baseline, "
                        "else the first method)")
    p.add_argument("--format", choices=("markdown", "csv"), default="markdown",
                   help="summary format (default: markdown)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_plot(p, "the --report summary (bound / best and the share proven optimal per device count)")
    p.set_defaults(func=run)
    return p
