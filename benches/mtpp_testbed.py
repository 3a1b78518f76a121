"""The MTPP certificate testbed: every bound of the ladder against the best plan, in the paper's form.

Archer et al. report, per bound and device count ``k``, the geometric mean of ``bound / best``
over their models (``best``: the cheapest partition found). This script does the same on REGAL
graphs we generate (:func:`stagecut.examples.regal_graph`), one JSON line per instance and level,
then the table (Markdown) with the geometric means and the gap closed against the simple bound
(``(1 - simple) / (1 - best bound)``, as the paper's 9.9x).

    python benches/mtpp_testbed.py run OUT.jsonl [--sizes 100,200] [--models erdos_renyi,...] [--seeds 0]
           [--ks 2,4,8,16,32,64] [--budget 20] [--comb-budget S] [--mip-levels bottleneck] [--mip-max-nodes 100]
           [--decodes 10000] [--improve-budget 10] [--starts 1]
    python benches/mtpp_testbed.py table OUT.jsonl            # the Markdown table on stdout
    python benches/mtpp_testbed.py relevel OUT.jsonl NEW.jsonl --levels crossing   # a bound's before/after
    python benches/mtpp_testbed.py gap [--sizes 24] [--ks 4,8] # plan vs bound, where the exact DP runs
    python benches/mtpp_testbed.py long [--sizes 80] [--k 8] [--mip-time 900] [--starts 8]  # both halves, long
    python benches/mtpp_testbed.py payments [--sizes 24] [--k 8]  # what cover counts against the optimum
    python benches/mtpp_testbed.py addlevel OUT.jsonl NEW.jsonl --level block --ks 8   # a level added to a run
    python benches/mtpp_testbed.py partlp erdos_renyi:0:2712.3:3262 [--size 100] [--k 8] [--budget 150]  # lo to plan

The full testbed (40 graphs, 600 s per level, every MIP level):

    python benches/mtpp_testbed.py run full.jsonl --sizes 100,200,500,1000,2000 --seeds 0,1 --budget 600 \\
        --mip-levels bottleneck,bottleneck-guess,exact --mip-max-nodes 2000 --decodes 100000

Every bound is checked against the exact DP's optimum where the DP runs (few ideals): one above it
stops the run. ``best`` is the cheapest of ``slice_graph``'s default plan (BRKGA, ``--decodes``, then its
default 2 s of pairwise re-splits; ``--starts`` seeds) each improved further by ``improve_plan``
(``--improve-budget`` seconds), the exact DP where it runs (few ideals) and the partition the exact
MIP finds (improved the same way); every cost is the evaluator's. The table also gives the
certified ratio (best bound / plan) with ``slice_graph``'s plan (seed 0) and with the best plan. Each
level gets ``--budget`` seconds; the MIP levels start from the best bound of the levels before them (as in ``certify``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

from stagecut.errors import StagecutWarning, TooManyIdealsError
from stagecut.examples import regal_graph
from stagecut.mtpp.bounds import COMBINATORIAL, mtpp_bound
from stagecut.mtpp.cover import _cover_counts, cover_bound
from stagecut.mtpp.improve import improve_plan
from stagecut.mtpp.model import MtppProblem
from stagecut.mtpp.plan import SlicePlan
from stagecut.mtpp.slicegraph import slice_graph

MODELS = ("erdos_renyi", "barabasi_albert", "watts_strogatz", "random_geometric")


def best_plan(problem: MtppProblem, decodes: int, budget: float, improve_budget: float,
              starts: int = 1) -> tuple[float, float, str, float | None]:
    """``(slice_graph's cost, the best cost, its source, the optimum)``: ``slice_graph``'s BRKGA
    with its default re-splits (seed 0; seeds ``0..starts-1`` with ``starts > 1``), each plan
    improved further by :func:`~stagecut.mtpp.improve.improve_plan`, then the exact DP if the
    graph has few ideals (the optimum: ``None`` when the DP did not prove one). The first cost is
    seed 0's (the ``plan-brkga`` row)."""
    brkga = math.inf
    best, source, opt = math.inf, "", None
    for seed in range(max(1, starts)):
        plan = slice_graph(problem, method="brkga", seed=seed, decodes=decodes, time_limit=budget)
        assert plan.objective is not None
        if seed == 0:
            brkga = plan.objective
        if plan.objective < best:
            best, source = plan.objective, f"brkga seed {seed}"
        if improve_budget > 0:
            imp = improve_plan(problem, plan, time_limit=improve_budget)
            if imp.objective is not None and imp.objective < best:
                best, source = imp.objective, f"brkga seed {seed} + improve"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StagecutWarning)
            dp = slice_graph(problem, method="dp", max_ideals=200_000, time_limit=budget)
        if dp.status == "optimal":
            opt = dp.objective
        if dp.objective is not None and dp.objective < best:
            best, source = dp.objective, f"dp ({dp.status})"
        elif dp.status == "optimal":
            source += " (= dp optimum)"
    except TooManyIdealsError:
        pass
    return brkga, best, source, opt


def run(out: Path, sizes: list[int], models: list[str], seeds: list[int], ks: list[int], budget: float,
        mip_levels: list[str], mip_max_nodes: int, decodes: int, comb_budget: float, improve_budget: float,
        starts: int = 1) -> None:
    with out.open("a") as fh:
        for n in sizes:
            for model in models:
                for seed in seeds:
                    g = regal_graph(n, model=model, seed=seed)
                    for k in ks:
                        p = MtppProblem(g, devices=k)
                        t, c = time.perf_counter(), time.process_time()
                        brkga, best, source, opt = best_plan(p, decodes, budget, improve_budget, starts)
                        base = {"n": n, "model": model, "seed": seed, "k": k}
                        fh.write(json.dumps({**base, "level": "plan-brkga", "cost": brkga}) + "\n")
                        fh.write(json.dumps({**base, "level": "plan", "cost": best, "source": source,
                                             "wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c})
                                 + "\n")
                        known = None
                        levels = list(COMBINATORIAL) + (mip_levels if n <= mip_max_nodes else [])
                        for level in levels:
                            t, c = time.perf_counter(), time.process_time()
                            extra = {} if level in COMBINATORIAL else {"known_bound": known}
                            limit = comb_budget if level in COMBINATORIAL else budget
                            r = mtpp_bound(p, level=level, time_limit=limit, threads=1, **extra)
                            if r.bound is not None and r.bound != math.inf:
                                known = r.bound if known is None else max(known, r.bound)
                            if opt is not None and r.bound is not None and r.bound > opt * (1 + 1e-9):
                                raise AssertionError(f"{base} {level}: bound {r.bound} above the DP optimum {opt}")
                            if level == "exact" and r.blocks is not None and r.objective is not None and \
                                    r.objective < best:
                                imp = improve_plan(p, [list(b) for b in r.blocks], time_limit=improve_budget)
                                best, how = r.objective, "exact MIP"
                                if imp.objective is not None and imp.objective < best:
                                    best, how = imp.objective, "exact MIP + improve"
                                fh.write(json.dumps({**base, "level": "plan", "cost": best, "source": how}) + "\n")
                            row = {**base, "level": level, "bound": r.bound, "status": r.status,
                                   "wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}
                            fh.write(json.dumps(row) + "\n")
                            fh.flush()
                            print(json.dumps(row), flush=True)


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(max(x, 1e-12)) for x in xs) / len(xs)) if xs else math.nan


def table(path: Path) -> str:
    """Markdown: per graph size and ``k``, the geometric mean of ``bound / best`` per level
    (over the graphs where it gave a bound: their count in brackets when not all), of the best
    level, the gap closed against the simple bound, and the certified ratio (best bound / plan)
    with ``slice_graph``'s plan (seed 0) and with the best plan found."""
    best: dict[tuple[object, ...], float] = {}
    brkga: dict[tuple[object, ...], float] = {}
    bounds: dict[tuple[object, ...], dict[str, float]] = defaultdict(dict)
    ran: set[tuple[object, ...]] = set()
    for line in path.read_text().splitlines():
        r = json.loads(line)
        key = (r["n"], r["model"], r["seed"], r["k"])
        if r["level"] == "plan":
            best[key] = min(best.get(key, math.inf), r["cost"])
        elif r["level"] == "plan-brkga":
            brkga[key] = r["cost"]
        else:
            ran.add((*key, r["level"]))
            if r["bound"] is not None:
                bounds[key][r["level"]] = r["bound"]
    levels = [lv for lv in ("simple", "node-cut", "crossing", "cover", "subgraph", "block", "bottleneck",
                            "bottleneck-guess", "exact")
              if any(lv in b for b in bounds.values()) or any(r[-1] == lv for r in ran)]
    rows = sorted({(key[0], key[3]) for key in best})
    head = ["nodes", "k", "graphs", *levels, "best bound", "gap closed", "proven optimal", "slice_graph / best",
            "certified, slice_graph plan", "certified, best plan"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, k in rows:
        keys = [key for key in best if key[0] == n and key[3] == k and key in bounds]
        cells = [str(n), str(k), str(len(keys))]
        for lv in levels:
            got = [min(bounds[key][lv], best[key]) / best[key] for key in keys if lv in bounds[key]]
            if not got:
                cells.append("no bound" if any((*key, lv) in ran for key in keys) else "not run")
                continue
            cells.append(f"{_geomean(got):.4f}" + ("" if len(got) == len(keys) else f" ({len(got)})"))
        top = [min(max(bounds[key].values()), best[key]) / best[key] for key in keys]
        simple = _geomean([bounds[key]["simple"] / best[key] for key in keys])
        g = _geomean(top)
        cells.append(f"{g:.4f}")
        cells.append("all closed" if g >= 1 - 1e-9 else f"{(1 - simple) / (1 - g):.1f}x")
        cells.append(f"{sum(t >= 1 - 1e-9 for t in top)}/{len(keys)}")
        if all(key in brkga for key in keys):
            cells.append(f"{_geomean([brkga[key] / best[key] for key in keys]):.4f}")
            cells.append(f"{_geomean([min(max(bounds[key].values()), brkga[key]) / brkga[key] for key in keys]):.4f}")
        else:
            cells += ["-", "-"]
        cells.append(f"{g:.4f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The levels ``gap`` runs: not ``subgraph``, which on graphs the DP solves is the DP itself.
_GAP_LEVELS = ("simple", "node-cut", "crossing", "cover", "bottleneck")


def dp_optimum(problem: MtppProblem, budget: float) -> tuple[float, SlicePlan] | None:
    """``(optimum, the DP's plan)`` where the exact DP proves one within ``budget`` seconds and
    400,000 ideals, else ``None``: the per-instance loader of ``gap`` and ``payments``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StagecutWarning)
            dp = slice_graph(problem, method="dp", max_ideals=400_000, time_limit=budget)
    except TooManyIdealsError:
        return None
    if dp.status != "optimal" or dp.objective is None:
        return None
    return dp.objective, dp


def gap(sizes: list[int], models: list[str], seeds: list[int], ks: list[int], decodes: int, budget: float,
        improve_budget: float, levels: tuple[str, ...] = _GAP_LEVELS) -> str:
    """Where the exact DP runs, split the certified ratio into the plan's part and the bound's:
    per size and ``k``, geometric means of BRKGA / optimum, BRKGA improved / optimum and
    each bound / optimum (every bound is also checked to be at most the optimum). The bounds are
    ``levels``: by default those that do not solve the graph exactly (:data:`_GAP_LEVELS`), as on
    graphs too large for the DP (``partition-lp`` may be added: ``--levels``)."""
    rows: dict[tuple[int, int], list[dict[str, float]]] = defaultdict(list)
    for n in sizes:
        for model in models:
            for seed in seeds:
                g = regal_graph(n, model=model, seed=seed)
                for k in ks:
                    p = MtppProblem(g, devices=k)
                    solved = dp_optimum(p, budget)
                    if solved is None:
                        continue
                    opt = solved[0]
                    plan = slice_graph(p, method="brkga", seed=0, decodes=decodes, improve=False)
                    imp = improve_plan(p, plan, time_limit=improve_budget)
                    assert plan.objective is not None and imp.objective is not None
                    row = {"brkga": plan.objective / opt, "improved": imp.objective / opt}
                    known = None
                    for level in levels:
                        extra = {} if level in COMBINATORIAL else {"known_bound": known}
                        r = mtpp_bound(p, level=level, time_limit=budget, threads=1, **extra)
                        assert r.bound is not None and r.bound <= opt * (1 + 1e-9), (n, model, seed, k, level)
                        known = r.bound if known is None else max(known, r.bound)
                        row[level] = r.bound / opt
                    row["certified"] = known / plan.objective if known is not None else math.nan
                    row["certified improved"] = known / imp.objective if known is not None else math.nan
                    rows[(n, k)].append(row)
                    print(json.dumps({"n": n, "model": model, "seed": seed, "k": k, **row}), file=sys.stderr)
    cols = ["brkga", "improved", *levels, "certified", "certified improved"]
    head = ["nodes", "k", "graphs", "BRKGA / opt", "improved / opt", *(f"{c} / opt" for c in levels),
            "certified (BRKGA)", "certified (improved)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (n, k), rs in sorted(rows.items()):
        lines.append("| " + " | ".join([str(n), str(k), str(len(rs)),
                                        *(f"{_geomean([r[c] for r in rs]):.4f}" for c in cols)]) + " |")
    return "\n".join(lines)


def long_runs(sizes: list[int], models: list[str], k: int, mip_time: float, starts: int, decodes: int,
              improve_budget: float) -> str:
    """Both halves at one ``k`` on graphs the DP cannot solve: BRKGA (seed 0), improved; the best
    of ``starts`` BRKGA seeds each improved; the exact MIP's partition (``mip_time`` s, the
    crossing bound as its floor), improved; the crossing bound and the MIP's bound."""
    lines = ["| graph | BRKGA | + improve_plan | best of seeds, each improved | exact MIP's partition, improved | "
             "crossing bound | exact MIP's bound (wall, CPU s) | certified: BRKGA / best |", "|" + "---|" * 8]
    for n in sizes:
        for model in models:
            p = MtppProblem(regal_graph(n, model=model, seed=0), devices=k)
            plans = []
            for seed in range(max(1, starts)):
                plan = slice_graph(p, method="brkga", seed=seed, decodes=decodes, improve=False)
                imp = improve_plan(p, plan, time_limit=improve_budget)
                assert plan.objective is not None and imp.objective is not None
                plans.append((plan.objective, imp.objective))
            cross = mtpp_bound(p, level="crossing").bound
            assert cross is not None
            t, c = time.perf_counter(), time.process_time()
            r = mtpp_bound(p, level="exact", time_limit=mip_time, threads=1, known_bound=cross)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            mip_plan, mip_improved = "none", math.inf
            if r.blocks is not None and r.objective is not None:
                imp = improve_plan(p, [list(b) for b in r.blocks], time_limit=improve_budget)
                assert imp.objective is not None
                mip_improved = imp.objective
                mip_plan = f"{r.objective:,.1f} -> {imp.objective:,.1f}"
            bound = max(cross, r.bound if r.bound is not None else -math.inf)
            best = min(min(q for _, q in plans), mip_improved)
            lines.append(f"| {model}, {n} | {plans[0][0]:,.1f} | {plans[0][1]:,.1f} | "
                         f"{min(q for _, q in plans):,.1f} | {mip_plan} | {cross:,.1f} | "
                         f"{'none above it' if r.bound is None or r.bound <= cross else f'{r.bound:,.1f}'} "
                         f"({wall:.0f}, {cpu:.0f}) | {bound / plans[0][0]:.4f} / {bound / best:.4f} |")
            print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def payments(sizes: list[int], models: list[str], seeds: list[int], k: int, budget: float) -> str:
    """Where the exact DP runs, the tensors its optimal partition pays at ``T = OPT`` against what
    ``cover`` counts there: the forced ones (the optimum's payments and ``cover``'s count, each
    with the mean number of blocks per tensor) and those not forced that the optimum pays."""
    lines = ["| graph | optimum | cover / opt | tensors the optimum pays | of them forced (paid x times) | "
             "cover counts | not forced, paid by the optimum |", "|" + "---|" * 7]
    for n in sizes:
        for model in models:
            for seed in seeds:
                p = MtppProblem(regal_graph(n, model=model, seed=seed), devices=k)
                g = p.graph
                solved = dp_optimum(p, budget)
                if solved is None:
                    continue
                opt, dp = solved
                counts = _cover_counts(p, None, 8, 6, None)
                bound = cover_bound(p).bound
                assert bound <= opt * (1 + 1e-9), (n, model, seed, k)
                block = {g.index[v]: b for b, st in enumerate(dp.stages) for v in st.nodes}
                total = forced_paid = forced_counted = forced_comm = loose = 0.0
                for u in range(len(g.nodes)):
                    if not g.succ[u]:
                        continue
                    m = len({block[u]} | {block[v] for v in g.succ[u]})
                    c = g.nodes[u].comm
                    pay = c * m if m > 1 else 0.0
                    total += pay
                    need = counts.paid(p, u, opt)
                    if need:
                        forced_paid += pay
                        forced_counted += c * need
                        forced_comm += c
                    else:
                        loose += pay
                per = max(forced_comm, 1e-300)
                lines.append(f"| {model}, seed {seed} | {opt:.1f} | {bound / opt:.3f} | {total:,.0f} | "
                             f"{forced_paid:,.0f} ({forced_paid / per:.1f}x) | {forced_counted:,.0f} "
                             f"({forced_counted / per:.1f}x) | {loose:,.0f} |")
                print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def add_level(src: Path, out: Path, level: str, budget: float, ks: list[int]) -> None:
    """``src``'s rows and, for each of its instances (at ``ks``), one more row: ``level`` run
    with ``budget`` seconds, started from the best bound ``src`` has for that instance (as
    ``certify`` starts a MIP level). A new level's gain on the same plans."""
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    best: dict[tuple[object, ...], float] = {}
    for r in rows:
        if r["level"] not in ("plan", "plan-brkga") and r.get("bound") is not None:
            key = (r["n"], r["model"], r["seed"], r["k"])
            best[key] = max(best.get(key, -math.inf), r["bound"])
    with out.open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
        for (n, model, seed, k), known in sorted(best.items(), key=str):
            if ks and k not in ks:
                continue
            p = MtppProblem(regal_graph(n, model=model, seed=seed), devices=k)
            t, c = time.perf_counter(), time.process_time()
            b = mtpp_bound(p, level=level, time_limit=budget, threads=1, known_bound=known)
            row = {"n": n, "model": model, "seed": seed, "k": k, "level": level, "bound": b.bound,
                   "status": b.status, "known": known, "wall_s": time.perf_counter() - t,
                   "cpu_s": time.process_time() - c}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(json.dumps(row), flush=True)


def partlp_runs(graphs: list[str], n: int, k: int, budget: float, solver: str = "cbc",
                search: float | None = None, climb: float = 0.5) -> str:
    """``partition-lp`` called directly on each ``model:seed:lo:plan`` (a bound already proven
    and a plan's cost, e.g. ``block``'s and the best plan's): the bound, the certified ratio
    before (``lo / plan``) and after, the tested ``T`` values, MIPs, LPs and CPU seconds;
    ``solver`` for the pricing MIP, ``search`` the seconds of the branch and bound over blocks
    before each (default: the level's own), ``climb`` where the next ``T`` is tried (0.5: a
    bisection; smaller: up from ``lo``)."""
    from stagecut.mtpp.partlp import SEARCH_SECONDS, partition_lp_bound

    lines = ["| graph | before (lo / plan) | after | tested T (refuted?) | MIPs | LPs | blocks | CPU s | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for spec in graphs:
        model, seed, lo, plan = spec.split(":")
        p = MtppProblem(regal_graph(n, model=model, seed=int(seed)), devices=k)
        t, c = time.perf_counter(), time.process_time()
        r = partition_lp_bound(p, lo=float(lo), hi=float(plan), time_limit=budget, threads=1, solver=solver,
                               search=SEARCH_SECONDS if search is None else search, climb=climb)
        cpu, wall = time.process_time() - c, time.perf_counter() - t
        tested = ", ".join(f"{x:,.1f} ({'yes' if v else 'no'})" for x, v in r.tested)
        lines.append(f"| {model}, seed {seed} | {float(lo) / float(plan):.4f} | {r.bound / float(plan):.4f} | "
                     f"{tested} | {r.mips} | {r.lps} | {r.columns} | {cpu:.1f} | {wall:.1f} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def pricing_runs(n: int, graphs: list[str], k: int, searches: list[float], solver: str = "cbc") -> str:
    """``partition-lp`` with each pricing set-up (``searches``: seconds of the branch and bound over
    blocks before each pricing MIP, 0 the MIP alone) on each ``model:seed`` of ``n`` nodes, from
    ``cover``'s bound up to the exact DP's optimum, no time limit: bound / optimum, pricing
    calls and CPU seconds of each (every bound checked to be at most the optimum)."""
    from stagecut.mtpp.partlp import partition_lp_bound

    head = " | ".join(f"search {x:g} s: bound / opt, pricings, CPU s" for x in searches)
    lines = [f"| graph ({n} nodes, k = {k}) | cover / opt | {head} |", "|---" * (2 + len(searches)) + "|"]
    for spec in graphs:
        model, seed = spec.split(":")
        p = MtppProblem(regal_graph(n, model=model, seed=int(seed)), devices=k)
        solved = dp_optimum(p, 600.0)
        if solved is None:
            continue
        opt = solved[0]
        lo = cover_bound(p).bound
        cells = []
        for x in searches:
            c = time.process_time()
            r = partition_lp_bound(p, lo=lo, hi=opt, solver=solver, threads=1, search=x)
            cpu = time.process_time() - c
            assert r.bound <= opt * (1 + 1e-9), (spec, x, r.bound, opt)
            cells.append(f"{r.bound / opt:.4f}, {r.mips}, {cpu:.1f}")
        lines.append(f"| {model}, seed {seed} | {lo / opt:.4f} | " + " | ".join(cells) + " |")
        print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def relevel(src: Path, out: Path, levels: list[str], budget: float) -> None:
    """``src``'s rows, with the bound rows of ``levels`` computed again (the current code, ``budget``
    seconds each) on each instance: the before and after of a change to a bound, the plans
    unchanged. Each new bound is checked against the exact DP's optimum where ``src`` has one."""
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    with out.open("w") as fh:
        for r in rows:
            if r["level"] not in levels:
                fh.write(json.dumps(r) + "\n")
                continue
            p = MtppProblem(regal_graph(r["n"], model=r["model"], seed=r["seed"]), devices=r["k"])
            t, c = time.perf_counter(), time.process_time()
            b = mtpp_bound(p, level=r["level"], time_limit=budget, threads=1)
            new = {**r, "bound": b.bound, "status": b.status, "before": r["bound"],
                   "wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}
            fh.write(json.dumps(new) + "\n")
            print(json.dumps(new), flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--sizes", default="100,200")
    r.add_argument("--models", default=",".join(MODELS))
    r.add_argument("--seeds", default="0")
    r.add_argument("--ks", default="2,4,8,16,32,64")
    r.add_argument("--budget", type=float, default=20.0)
    r.add_argument("--mip-levels", default="bottleneck")
    r.add_argument("--mip-max-nodes", type=int, default=100)
    r.add_argument("--decodes", type=int, default=10_000)
    r.add_argument("--comb-budget", type=float, default=None, help="seconds per combinatorial level")
    r.add_argument("--improve-budget", type=float, default=10.0,
                   help="seconds for the pairwise re-splits of each plan (0: none)")
    r.add_argument("--starts", type=int, default=1, help="BRKGA seeds, each plan improved (the best kept)")
    d = sub.add_parser("gap", help="the plan's and the bound's parts of the gap, where the exact DP runs")
    d.add_argument("--sizes", default="24")
    d.add_argument("--models", default=",".join(MODELS))
    d.add_argument("--seeds", default="0,1,2")
    d.add_argument("--ks", default="4,8")
    d.add_argument("--decodes", type=int, default=10_000)
    d.add_argument("--budget", type=float, default=60.0)
    d.add_argument("--improve-budget", type=float, default=20.0)
    d.add_argument("--levels", default=",".join(_GAP_LEVELS), help="the bounds, in order (e.g. add partition-lp)")
    lr = sub.add_parser("long", help="long runs at one k: several plans, the exact MIP for long")
    lr.add_argument("--sizes", default="80")
    lr.add_argument("--models", default="erdos_renyi,barabasi_albert")
    lr.add_argument("--k", type=int, default=8)
    lr.add_argument("--mip-time", type=float, default=900.0)
    lr.add_argument("--starts", type=int, default=8)
    lr.add_argument("--decodes", type=int, default=10_000)
    lr.add_argument("--improve-budget", type=float, default=20.0)
    al = sub.add_parser("addlevel", help="one more level on each instance of a run, from its best bound")
    al.add_argument("src", type=Path)
    al.add_argument("out", type=Path)
    al.add_argument("--level", default="block")
    al.add_argument("--budget", type=float, default=30.0)
    al.add_argument("--ks", default="")
    pm = sub.add_parser("payments", help="what cover counts against the tensors the optimum pays")
    pm.add_argument("--sizes", default="24")
    pm.add_argument("--models", default=",".join(MODELS))
    pm.add_argument("--seeds", default="0,1,2")
    pm.add_argument("--k", type=int, default=8)
    pm.add_argument("--budget", type=float, default=60.0)
    rl = sub.add_parser("relevel", help="compute some bound levels again on the instances of a run")
    rl.add_argument("src", type=Path)
    rl.add_argument("out", type=Path)
    rl.add_argument("--levels", default="crossing")
    rl.add_argument("--budget", type=float, default=2.0)
    pl = sub.add_parser("partlp", help="partition-lp called directly from a proven bound up to a plan's cost")
    pl.add_argument("graphs", help="model:seed:lo:plan,... (lo a proven bound, plan a partition's cost)")
    pl.add_argument("--size", type=int, default=100)
    pl.add_argument("--k", type=int, default=8)
    pl.add_argument("--budget", type=float, default=150.0)
    pl.add_argument("--solver", default="cbc", help="the pricing MIP's solver (cbc or highs)")
    pl.add_argument("--search", type=float, default=None,
                    help="seconds of the branch and bound over blocks before each pricing MIP (0: none)")
    pl.add_argument("--climb", type=float, default=0.5,
                    help="the next T as a share of the interval left (0.5: bisection; smaller: up from lo)")
    pr = sub.add_parser("pricing", help="partition-lp with and without the branch and bound pricing, where the DP runs")
    pr.add_argument("graphs", help="model:seed,...")
    pr.add_argument("--size", type=int, default=24)
    pr.add_argument("--k", type=int, default=8)
    pr.add_argument("--searches", default="0,0.5", help="seconds of the branch and bound before each MIP")
    pr.add_argument("--solver", default="cbc")
    t = sub.add_parser("table")
    t.add_argument("path", type=Path)
    a = ap.parse_args(argv)
    if a.what == "table":
        print(table(a.path))
        return 0
    if a.what == "relevel":
        relevel(a.src, a.out, [lv for lv in a.levels.split(",") if lv], a.budget)
        return 0
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    if a.what == "addlevel":
        add_level(a.src, a.out, a.level, a.budget, ints(a.ks))
        return 0
    if a.what == "long":
        print(long_runs(ints(a.sizes), [m for m in a.models.split(",") if m], a.k, a.mip_time, a.starts, a.decodes,
                        a.improve_budget))
        return 0
    if a.what == "partlp":
        print(partlp_runs([g for g in a.graphs.split(",") if g], a.size, a.k, a.budget, a.solver, a.search, a.climb))
        return 0
    if a.what == "pricing":
        print(pricing_runs(a.size, [g for g in a.graphs.split(",") if g], a.k,
                           [float(x) for x in a.searches.split(",") if x], a.solver))
        return 0
    if a.what == "payments":
        print(payments(ints(a.sizes), [m for m in a.models.split(",") if m], ints(a.seeds), a.k, a.budget))
        return 0
    if a.what == "gap":
        print(gap(ints(a.sizes), [m for m in a.models.split(",") if m], ints(a.seeds), ints(a.ks), a.decodes,
                  a.budget, a.improve_budget, tuple(lv for lv in a.levels.split(",") if lv)))
        return 0
    run(a.out, ints(a.sizes), [m for m in a.models.split(",") if m], ints(a.seeds), ints(a.ks), a.budget,
        [m for m in a.mip_levels.split(",") if m], a.mip_max_nodes, a.decodes,
        a.budget if a.comb_budget is None else a.comb_budget, a.improve_budget, a.starts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
