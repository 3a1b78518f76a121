"""The PyTorch path against measurement: predicted vs measured stage times, and the measured
bottleneck of stagecut's plan against the splits people use.

Run: ``python benches/bench_reality.py`` (``--models gpt resnet50 inception_v3``, ``--k 2 4``,
``--repeat 3``, ``--depths 12 48 96``, ``--markdown docs/results/pytorch.md``). First, the exact
plans of GPT-style stacks of each depth (forward and training, family and CPU seconds). Then, for
each model (random weights, eval
mode, forward pass, ``torch.set_num_threads(1)``, CPU) it:

1. traces the model (``torch.export``) and calibrates the node times on measured segments
   (:func:`stagecut.frontends.measure.calibrate`: 32 runs of program order built with
   ``split_module`` and timed in situ, thread CPU time);
2. plans with :func:`~stagecut.frontends.program_order.partition_trace` on the FLOP times
   (``flops``) and on the calibrated times (``calibrated``), then :func:`refine` from the
   calibrated plan (re-planned on measured stage times);
3. builds every plan's stages and times them (:func:`~stagecut.frontends.measure.measure`:
   passes over the stages in order, the median of ``3 * repeat`` passes), and reports each
   stage's measured/predicted ratio and whether the predicted bottleneck is the measured one;
4. splits the model's layers (top-level modules; the blocks of a top-level ``Sequential`` or
   ``ModuleList``; operators of the top-level ``forward`` join the layer before) the way
   DeepSpeed (``uniform``, ``parameters``, ``partition_balanced`` on the layers' calibrated
   times) and torchgpipe (``balance_by_time`` on the same times) do, and times those stages,
   ours and the refined plan's in the same passes
   (:func:`~stagecut.frontends.measure.measure_many`).

The machine is shared: absolute times move with its load between measurements, so each row
measures all of its plans in the same session, and the ratios, not the milliseconds, are the
result.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import platform
import sys
import time
from typing import Any

import stagecut as sc
from stagecut.frontends import baselines as bl
from stagecut.frontends.measure import Measurement, measure, measure_many, refine, slowest_within_noise
from stagecut.frontends.program_order import partition_trace
from stagecut.results import Plan

MODELS = ("gpt", "resnet50", "inception_v3")


def build(name: str) -> tuple[Any, tuple[Any, ...]]:
    """A model with random weights in eval mode, and its example inputs."""
    import torch

    torch.manual_seed(0)
    if name == "gpt":
        return _gpt(torch), (torch.randint(0, 2048, (2, 64)),)
    import torchvision

    if name == "resnet50":
        return torchvision.models.resnet50().eval(), (torch.randn(1, 3, 224, 224),)
    if name == "inception_v3":
        return (torchvision.models.inception_v3(init_weights=False, aux_logits=False).eval(),
                (torch.randn(1, 3, 299, 299),))
    raise SystemExit(f"unknown model {name!r}: one of {MODELS}")


def _gpt(torch: Any, layers: int = 12, d: int = 256, heads: int = 4, t: int = 64, vocab: int = 2048) -> Any:
    nn = torch.nn

    class Attn(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.register_buffer("mask", torch.tril(torch.ones(t, t, dtype=torch.bool)), persistent=False)

        def forward(self, x: Any) -> Any:
            b, n, c = x.shape
            q, k, v = (z.view(b, n, heads, c // heads).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c // heads)
            att = att.masked_fill(~self.mask[:n, :n], float("-inf")).softmax(-1)
            return self.proj((att @ v).transpose(1, 2).contiguous().view(b, n, c))

    class Block(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attn(), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(t, d)
            self.layers = nn.ModuleList([Block() for _ in range(layers)])
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x))

    return GPT().eval()


# ----------------------------------------------------------------------------- layers and peers
def layers_of(trace: Any, model: Any) -> list[list[str]]:
    """The model's layers in program order, as node lists: top-level children, split into their
    items when a child is a Sequential or ModuleList; nodes of no layer join the layer before."""
    import torch

    containers = {name for name, m in model.named_children()
                  if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList))}
    out: list[list[str]] = []
    keys: list[str | None] = []
    for v in trace.order:
        mods = trace.modules[v]
        key = None
        if mods:
            top = mods[0]
            key = next((m for m in mods if m.count(".") == 1), top) if top in containers else top
        if out and (key is None or key == keys[-1]):
            out[-1].append(v)
        else:
            out.append([v])
            keys.append(key)
    return out


def manual_plan(trace: Any, stages: list[list[str]], method: str) -> Plan:
    """A Plan with the given node lists as stages (pipeline order), scored by the evaluator."""
    stages = [s for s in stages if s]
    k = len(stages)
    assignment = {v: ("accelerator", i) for i, s in enumerate(stages) for v in s}
    ev = sc.evaluate(trace.graph, assignment, devices=k)
    by_index = {s.kind_index: s for s in ev.stages}
    loads = tuple(dataclasses.replace(by_index[i], index=i) for i in range(k))
    return Plan(objective=ev.objective, status="feasible", method=method, stages=loads, devices=k, cpus=0,
                memory=math.inf)


def _with_backward(trace: Any, stages: list[list[str]]) -> list[list[str]]:
    """Stages of forward node ids, with their backward nodes on a training trace."""
    if not trace.graph.is_training:
        return stages
    return [s + [f"{v}_bwd" for v in s] for s in stages]


def layer_times(trace: Any, model: Any, repeat: int, device: str = "cpu") -> list[float]:
    """Each layer's seconds measured as torchgpipe's ``balance_by_time`` profiles them: every
    layer built as a piece of the program and timed in situ (passes in program order, medians;
    forward and backward on a training trace)."""
    layers = _with_backward(trace, layers_of(trace, model))
    m = measure(trace, manual_plan(trace, layers, "layers"), repeat=repeat, reference=False, device=device)
    return [s.measured for s in m.stages]


def _timed_once(trace: Any, group: dict[str, Plan], repeat: int) -> dict[str, dict[str, Any]]:
    """Every plan of ``group`` timed in the same passes, a split that several methods give built
    and timed once (the same stages built twice would differ by noise alone): each plan's
    ``_row``, with ``same_as`` the first method that gave its split."""
    first: dict[Any, str] = {}
    for key, pl in group.items():
        first.setdefault(tuple(sorted(pl.assignment().items())), key)
    same = {key: first[tuple(sorted(pl.assignment().items()))] for key, pl in group.items()}
    timed = measure_many(trace, {key: group[key] for key in first.values()}, repeat=repeat, reference=False)
    return {key: {**_row(timed[same[key]]), "same_as": same[key] if same[key] != key else None} for key in group}


def peer_plans(trace: Any, model: Any, k: int, times: list[float] | None = None) -> dict[str, Plan]:
    """The peers' splits of the model's layers into ``k`` stages; ``times``: the layers' measured
    seconds for ``partition_balanced`` and ``balance_by_time`` (default: the trace's node times)."""
    layers = layers_of(trace, model)
    if times is None:
        times = [sum(trace.graph.node(v).compute["accelerator"] for v in layer) for layer in layers]
    params = [sum(trace.memory[v] for v in layer) for layer in layers]
    parts = {
        "uniform": bl.uniform_parts(len(layers), k),
        "deepspeed_parameters": bl.spread_parts(params, k),
        "deepspeed_balanced": bl.spread_parts(times, k),
    }
    b = bl.block_balance(times, k)
    parts["torchgpipe_by_time"] = [sum(b[:i]) for i in range(len(b) + 1)]
    out = {}
    for name, p in parts.items():
        stages = [[v for layer in layers[a:z] for v in layer] for a, z in zip(p, p[1:])]
        out[name] = manual_plan(trace, _with_backward(trace, stages), name)
    return out


def _stage_layers(trace: Any, model: Any, plan: Plan) -> list[float]:
    """Where each stage boundary of ``plan`` falls, in layers (``layers_of``): for the boundary
    after stage ``i``, the first layer holding a node of a later stage, plus the fraction of
    that layer's nodes in stages up to ``i`` (a whole number where the plan cuts between
    layers; stagecut's operator-level plans can cut inside one, the peers cannot)."""
    from stagecut.frontends.split import stage_of_nodes

    stage = stage_of_nodes(plan, trace)
    layers = layers_of(trace, model)
    out = []
    for i in range(len(plan.stages) - 1):
        at = next((j for j, layer in enumerate(layers) if any(stage.get(v, 0) > i for v in layer)), len(layers))
        part = layers[at] if at < len(layers) else []
        out.append(round(at + (sum(stage.get(v, 0) <= i for v in part) / len(part) if part else 0.0), 2))
    return out


def _cuts(xs: list[float], k: int) -> str:
    """The boundaries of :func:`_stage_layers`; an older record (each change of stage along
    program order) is shown per layer, several changes in one layer as a range."""
    if len(xs) == k - 1:
        return ", ".join(f"{x:g}" for x in xs)
    by: dict[int, list[float]] = {}
    for x in xs:
        by.setdefault(int(x), []).append(x)
    return ", ".join(f"{v[0]:g}" if len(v) == 1 else f"{v[0]:g}-{v[-1]:g} (its branches split)" for v in by.values())


# ----------------------------------------------------------------------------- depth
def depth_rows(depths: list[int], ks: list[int]) -> list[dict[str, Any]]:
    """partition_trace on GPT-style stacks of each depth at operator level (d_model 64, FLOP
    times), forward and training (a backward node per operator): family, status, CPU seconds."""
    import torch

    from stagecut.frontends._common import trace_with_backward
    from stagecut.frontends.torch import trace_torch

    rows = []
    for depth in depths:
        torch.manual_seed(0)
        model = _gpt(torch, layers=depth, d=64, t=16, vocab=256)
        t = trace_torch(model, (torch.randint(0, 256, (2, 16)),), bandwidth="10GB/s", flops_per_s=1e10)
        for training in (False, True):
            tt = trace_with_backward(t, 2.0) if training else t
            for k in ks:
                c0 = time.process_time()
                plan = partition_trace(tt, k, time_limit=30.0)
                cpu = time.process_time() - c0
                rows.append({"layers": depth, "training": training, "k": k, "nodes": len(tt.graph.nodes),
                             "family": plan.stats.get("family"), "status": plan.status,
                             "restriction_cost": plan.stats.get("restriction_cost"),
                             "ideals": plan.stats.get("ideals"), "cpu_s": round(cpu, 2)})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


# ----------------------------------------------------------------------------- the run
def _row(m: Measurement) -> dict[str, Any]:
    pmax = max(s.predicted for s in m.stages)
    now = [s.predicted_now for s in m.stages]
    out = {
        "ratios": [round(s.ratio, 3) for s in m.stages],
        "predicted_ms": [round(1e3 * s.predicted, 3) for s in m.stages],
        "measured_ms": [round(1e3 * s.measured, 3) for s in m.stages],
        "backward_ms": [round(1e3 * s.backward, 3) for s in m.stages],
        "measured_max_ms": round(1e3 * m.measured_max, 3),
        "spread_ms": [round(1e3 * s.spread, 3) for s in m.stages],
        # each pass's slowest stage (plans timed in the same passes compare pass by pass)
        "max_passes_ms": [round(1e3 * max(x), 3) for x in zip(*(s.passes for s in m.stages))],
        "passes_ms": [[round(1e3 * x, 3) for x in s.passes] for s in m.stages],
        "same_bottleneck": m.predicted_bottleneck == m.measured_bottleneck,
        # the stage measured slowest was predicted within 5% of the slowest: a near-tie
        "bottleneck_within_5pct": m.stages[m.measured_bottleneck].predicted >= 0.95 * pmax,
    }
    if m.drift is not None:
        nmax = max(x or 0.0 for x in now)
        out.update({
            "drift": round(m.drift, 3),
            "ratios_now": [round(s.ratio_now or 0.0, 3) for s in m.stages],
            "predicted_now_ms": [round(1e3 * (x or 0.0), 3) for x in now],
            "same_bottleneck_now": m.predicted_now_bottleneck == m.measured_bottleneck,
            "bottleneck_now_within_5pct": (now[m.measured_bottleneck] or 0.0) >= 0.95 * nmax,
        })
    return out


def run(models: list[str], ks: list[int], repeat: int, peers: bool = True, training: bool = True,
        forward: bool = True, on_row: Any = None, device: str = "cpu") -> list[dict[str, Any]]:
    """The rows of each model and k: forward (``forward``) and forward+backward (``training``)
    measurements; ``on_row(rows)`` after each row (to save partial results); ``device``: where
    to calibrate and time (``"cuda"``: CUDA events)."""
    import torch

    from stagecut.frontends.piece_timing import check_device

    device = check_device(device)  # refused before any model is built

    from stagecut.frontends._common import trace_with_backward
    from stagecut.frontends.measure import calibrated_trace
    from stagecut.frontends.torch import trace_torch

    torch.set_num_threads(1)
    rows = []
    for name in models:
        model, args = build(name)
        c0 = time.process_time()
        t = trace_torch(model, args, bandwidth="10GB/s", flops_per_s=1e10)
        c1 = time.process_time()
        tc = t.calibrated(warmup=2, repeat=repeat, device=device) if forward else None
        c2 = time.process_time()
        tt = t.calibrated(warmup=2, repeat=repeat, training=True, device=device) if training else None
        c3 = time.process_time()
        # each layer timed in situ, as torchgpipe's balance_by_time profiles it, for the peers
        ltimes = layer_times(tc, model, repeat, device) if tc is not None and peers else None
        ltt: list[float] | None = None
        c4 = time.process_time()
        print(f"{name}: {len(t.order)} nodes, trace {c1 - c0:.1f} s CPU, calibration {c2 - c1:.1f} s CPU "
              f"(with the backward {c3 - c2:.1f} s), layer times {c4 - c3:.1f} s", file=sys.stderr, flush=True)
        for k in ks:
            r0 = time.process_time()
            row: dict[str, Any] = {"model": name, "k": k, "nodes": len(t.order)}
            if tc is not None:
                plans = {"flops": partition_trace(t, k), "calibrated": partition_trace(tc, k)}
                row["flops"] = _row(measure(t, plans["flops"], repeat=repeat, device=device))
                row["calibrated"] = _row(measure(tc, plans["calibrated"], repeat=repeat))
                for label, plan in plans.items():
                    row[label]["family"] = plan.stats.get("family")
                if peers:
                    # refine's last step times the start, its re-plans and the best split between layers together
                    layer = partition_trace(tc, k, family="layer")
                    refined, m, _ = refine(tc, plans["calibrated"], k, rounds=2, repeat=repeat, candidates=[layer])
                    row["refined"] = _row(m)
                    row["refined"]["changed"] = refined.assignment() != plans["calibrated"].assignment()
                    # ours, refined and every peer split timed in the same passes (load drifts over minutes)
                    peer = peer_plans(tc, model, k, ltimes)
                    group = {"calibrated_again": plans["calibrated"], "refined_again": refined, **peer}
                    row.update(_timed_once(tc, group, repeat))
                    row["layer_ms"] = [round(1e3 * x, 3) for x in ltimes or []]
                    row["peer_stage_layers"] = {key: _stage_layers(tc, model, pl) for key, pl in group.items()}
            if tt is not None:
                cal = tt.calibration
                row["backward_factors"] = {kk: round(v, 2) for kk, v in (cal.backward_factors or {}).items()}
                ours = partition_trace(tt, k)
                # the usual rule, backward = 2x forward, on the same forward times
                fixed = partition_trace(trace_with_backward(calibrated_trace(t, cal), 2.0), k)
                group = {"training": ours}
                if fixed.assignment() != ours.assignment():
                    group["training_2x"] = fixed
                for key, m in measure_many(tt, group, repeat=repeat).items():
                    row[key] = _row(m)
                row["training"]["family"] = ours.stats.get("family")
                row["training_2x_same_plan"] = "training_2x" not in group
                if peers:  # forward+backward: ours and the peers on forward+backward layer times
                    if ltt is None:
                        ltt = layer_times(tt, model, repeat, device)
                    tgroup = {"calibrated_again": ours, **peer_plans(tt, model, k, ltt)}
                    row["training_peers"] = _timed_once(tt, tgroup, repeat)
                    row["training_layer_ms"] = [round(1e3 * x, 3) for x in ltt]
                    row["training_peer_stage_layers"] = {key: _stage_layers(tt, model, pl)
                                                         for key, pl in tgroup.items()}
            row["cpu_s"] = round(time.process_time() - r0, 1)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if on_row is not None:
                on_row(rows)
    return rows


PEERS = (("refined_again", "refined"), ("uniform", "uniform"), ("deepspeed_parameters", "DeepSpeed parameters"),
         ("deepspeed_balanced", "DeepSpeed balanced"), ("torchgpipe_by_time", "torchgpipe by time"))


def _paired(r: dict[str, Any], key: str, resamples: int = 1000) -> tuple[float, float]:
    """The plan ``key`` against ours: its slowest stage over ours (each stage's median over the
    passes), and the noise band of that ratio: half its interquartile range over bootstrap
    resamplings of the passes (both plans were timed in the same passes: one resampling draws
    the same passes for both). A record without the passes: the two bottleneck stages' spreads
    added in quadrature."""
    import numpy as np

    peer, ours = r[key], r["calibrated_again"]
    ratio = peer["measured_max_ms"] / ours["measured_max_ms"]
    if "passes_ms" not in peer or "passes_ms" not in ours:
        def rel(x: dict[str, Any]) -> float:
            i = x["measured_ms"].index(max(x["measured_ms"]))
            return float(x["spread_ms"][i] / x["measured_ms"][i])
        return ratio, math.hypot(rel(peer), rel(ours))
    a, b = np.array(peer["passes_ms"]), np.array(ours["passes_ms"])
    rng = np.random.default_rng(0)
    idx = rng.integers(0, a.shape[1], size=(resamples, a.shape[1]))
    boot = np.median(a[:, idx], axis=2).max(axis=0) / np.median(b[:, idx], axis=2).max(axis=0)
    q1, q3 = np.percentile(boot, [25, 75])
    return ratio, float(q3 - q1) / 2


def _peer_section(rows: list[dict[str, Any]], training: bool = False,
                  recheck: list[dict[str, Any]] | None = None) -> list[str]:
    """Ours against the peers, every plan timed in the same passes; where a peer is faster, why.
    ``training``: the forward+backward rows (``training_peers`` of each row)."""
    if training:
        rows = [{"model": r["model"], "k": r["k"], **r["training_peers"],
                 "peer_stage_layers": r.get("training_peer_stage_layers", {}),
                 "layer_ms": r.get("training_layer_ms", [])} for r in rows if "training_peers" in r]
        if not rows:
            return []
        peers = tuple(x for x in PEERS if x[0] != "refined_again")
        models = " ".join(dict.fromkeys(r["model"] for r in rows))
        return [
            "",
            "### Forward and backward",
            "",
            f"Regenerate: `python bench_reality.py --no-forward --models {models} --depths --repeat {_repeat(rows, 2)} "
            "--json "
            "pytorch_runs/peers_training.json`, then `--peers-training pytorch_runs/peers_training.json` in the "
            f"`--from` command above. As above ({_passes(rows)} passes) on the training trace "
            "(`t.calibrated(training=True)`): each stage "
            "timed forward then backward, the peers' `partition_balanced` and `balance_by_time` on each layer's "
            "measured forward+backward time; ours is the plan on the calibrated training trace (no refine).",
            "",
        ] + _peer_table(rows, peers, recheck or [])
    lines = [
        "",
        "## Measured bottleneck stage: ours against the splits people use",
        "",
        f"Regenerate: `python bench_reality.py --no-training --depths --repeat {_repeat(rows, 3)} --json "
        "pytorch_runs/peers.json`, "
        "then `--peers pytorch_runs/peers.json` in the `--from` command above. Forward, milliseconds of the slowest "
        "stage as measured (lower is better). In each row every plan's stages are timed in the same passes (each "
        f"pass runs all the plans, in rotating order, {_passes(rows)} passes), so the load of the machine hits them "
        "alike; a split "
        "that several methods give is built and timed once. `ours`: the plan on the calibrated trace; `refined`: "
        "`refine` (2 rounds of re-planning on measured stage times; then the start, the re-plans and the best "
        "split between top-level layers on the calibrated trace timed in the same passes, the fastest kept). "
        "The peers split the model's layers "
        "(top-level modules, the blocks of a top-level `Sequential` or `ModuleList`): DeepSpeed `uniform`, "
        "`parameters` (its default: balanced parameter counts) and `partition_balanced` on the layers' measured "
        "times, torchgpipe `balance_by_time` on the same times (each layer built as a piece of the program and "
        "timed in situ, as torchgpipe profiles it). In parentheses: the peer's slowest stage against ours (each "
        "stage's median over the passes), +- the noise band of that ratio: half its interquartile range over "
        "1,000 bootstrap resamplings of the passes (both plans resampled on the same passes); `= x`: the same "
        "split as `x`.",
        "",
    ]
    return lines + _peer_table(rows, PEERS)


def _pass_counts(rows: list[dict[str, Any]]) -> list[int]:
    """How many passes the rows' plans were timed in (as recorded), ascending."""
    return sorted({len(r["calibrated_again"]["passes_ms"][0]) for r in rows
                   if "passes_ms" in r.get("calibrated_again", {})})


def _passes(rows: list[dict[str, Any]]) -> str:
    """:func:`_pass_counts` as text (``9`` for records without their passes)."""
    return "/".join(str(x) for x in _pass_counts(rows)) or "9"


def _repeat(rows: list[dict[str, Any]], default: int) -> int:
    """The ``--repeat`` of the run that made the rows (each measurement times ``3 * repeat`` passes)."""
    n = _pass_counts(rows)
    return n[-1] // 3 if n else default


def _peer_table(rows: list[dict[str, Any]], peers: tuple[tuple[str, str], ...],
                recheck: list[dict[str, Any]] | None = None) -> list[str]:
    lines = [
        "| model | k | ours | " + " | ".join(label for _, label in peers) + " |",
        "|---|---|---|" + "---|" * len(peers),
    ]
    wins: list[tuple[str, str]] = []
    for r in rows:
        ours = r["calibrated_again"]["measured_max_ms"]
        cells = []
        for key, label in peers:
            same = r[key].get("same_as")
            if same == "calibrated_again":
                cells.append("= ours")
                continue
            med, band = _paired(r, key)
            name = dict(peers).get(same) if same else None
            cells.append(f"{r[key]['measured_max_ms']:.1f} ({100 * (med - 1):+.0f}% +-{100 * band:.0f})"
                         + (f" = {name}" if name else ""))
            if med < 1:
                wins.append((key, _why(r, key, label, med, band) + (_recheck_note(r, recheck or [])
                                                                     if key == "uniform" else "")
                              if same is None else ""))
        lines.append(f"| {r['model']} | {r['k']} | {ours:.1f} | " + " | ".join(cells) + " |")
    n = len(rows) * sum(key != "refined_again" for key, _ in peers)
    peer_wins = [w for key, w in wins if key != "refined_again"]
    inside = sum("; within it" in w for _, w in wins if w)
    lines += ["", f"A peer's split measured faster than ours in {len(peer_wins)} of {n} "
              f"comparisons (a split that several peers give counted for each); each such split, and the refined "
              f"plan where it measured faster, with its noise band ({inside} of {sum(1 for _, w in wins if w)} "
              "within it):" if wins else "No other plan measured faster than ours."]
    lines += [""] + [f"- {w}" for _, w in wins if w]
    lines += [
        "",
        "Where each plan cuts, in the model's layers counted from 0 as the peers see them (`5.04`: inside layer 5, "
        "4% of its operators before the cut; the peers cut between layers only), and each layer's measured "
        "milliseconds:",
        "",
        "| model | k | ours | uniform | DeepSpeed parameters | DeepSpeed balanced | torchgpipe by time | layer ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cuts = r.get("peer_stage_layers", {})

        def c(key: str, cuts: dict[str, Any] = cuts, k: int = r["k"]) -> str:
            return _cuts(cuts.get(key, []), k)

        lines.append(f"| {r['model']} | {r['k']} | {c('calibrated_again')} | {c('uniform')} | "
                     f"{c('deepspeed_parameters')} | {c('deepspeed_balanced')} | {c('torchgpipe_by_time')} | "
                     + " ".join(f"{x:.1f}" for x in r.get("layer_ms", [])) + " |")
    return lines


def _why(r: dict[str, Any], key: str, label: str, med: float, band: float) -> str:
    """One line: by how much a peer beat ours, and whether noise or the model explains it."""
    ours, peer = r["calibrated_again"], r[key]
    po, pp = max(ours["predicted_ms"]), max(peer["predicted_ms"])
    text = (f"{r['model']}, k = {r['k']}: {label} {100 * (med - 1):+.1f}% (noise band +-{100 * band:.1f}%"
            + ("; within it" if 1 - med <= band else "; outside it") + "). The calibrated model predicted its "
            f"slowest stage at {pp:.1f} ms against ours {po:.1f} ({100 * (pp / po - 1):+.1f}%)")
    err = 100 * ((peer["measured_max_ms"] / pp) / (ours["measured_max_ms"] / po) - 1)
    cuts = r.get("peer_stage_layers", {})
    inside = [x for x in cuts.get("calibrated_again", []) if x != int(x)]
    where = (f" Ours cuts inside a layer (at {', '.join(f'{x:g}' for x in inside)}), the peer between layers "
             f"(at {_cuts(cuts.get(key, []), r['k'])})." if inside and key != "refined_again" else "")
    return text + (f"; the model's error between the two splits ({err:+.1f}%) decided it." if 1 - med > band
                   else ".") + where


def _recheck_section(rows: list[dict[str, Any]]) -> list[str]:
    """The re-measured cuts (``--recheck``): per cut, the model's and the measured bottleneck
    against the cut between layers, over the trials, and each stage's change."""
    import numpy as np

    lines = [
        "",
        "### Re-measured: a cut inside a layer against the cut between layers",
        "",
        "Regenerate: `python bench_reality.py --recheck --models gpt --trials 5 --repeat 8 --json "
        "pytorch_runs/recheck.json`, then add `pytorch_runs/recheck.json` to the `--from` files. Two stages, "
        "forward+backward, on a fresh calibrated training trace: the cut between layers (`L+0`, where uniform "
        "cuts) and the cuts after the first 1, 2, ... operators of that layer (ours cuts there), all timed in "
        "the same passes, the whole measurement repeated (*trials*). *predicted*: the "
        "calibrated model at the speed of each trial (same passes) for the slowest stage, against `L+0`; "
        "*measured*: the slowest stage's median over the passes, against `L+0`'s (the peer table's statistic); "
        "*per pass*: the median over the passes of each pass's slowest stage against `L+0`'s in the same pass. "
        "Each: the median over the trials [their range]. *stage change*: each stage's measured milliseconds "
        "minus `L+0`'s, median over the trials, against the model's.",
        "",
        "| model | cut | operators moved to stage 0 | predicted | measured | per pass | stage change: measured "
        "(predicted) ms |",
        "|---|---|---|---|---|---|---|",
    ]

    def cell(xs: list[float]) -> str:
        return f"{100 * (float(np.median(xs)) - 1):+.1f}% [{100 * (min(xs) - 1):+.1f}, {100 * (max(xs) - 1):+.1f}]"

    for r in rows:
        at = r["layer"]
        base = f"{at}+0"
        for j, key in enumerate(r["predicted_ms"]):
            trials = r["trials"]
            pred = [max(t["plans"][key]["predicted_now_ms"]) / max(t["plans"][base]["predicted_now_ms"])
                    for t in trials]
            meas = [max(t["plans"][key]["measured_ms"]) / max(t["plans"][base]["measured_ms"]) for t in trials]
            per = [t["plans"][key]["against_first"] for t in trials]
            change = []
            for i in range(len(r["predicted_ms"][key])):
                m = float(np.median([t["plans"][key]["measured_ms"][i] - t["plans"][base]["measured_ms"][i]
                                     for t in trials]))
                p = float(np.median([t["plans"][key]["predicted_now_ms"][i] - t["plans"][base]["predicted_now_ms"][i]
                                     for t in trials]))
                change.append(f"{m:+.1f} ({p:+.1f})")
            ops = ", ".join(x.removeprefix("aten.").removesuffix(".default") for x in r["ops"][:j]) or "none"
            mark = " (ours)" if j == r["ours_ops"] else ""
            lines.append(f"| {r['model']} | {key}{mark} | {ops} | {cell(pred) if j else '-'} | "
                         f"{cell(meas) if j else '-'} | {cell(per) if j else '-'} | "
                         f"{' / '.join(change) if j else '-'} |")
    passes = sorted({t["passes"] for r in rows for t in r["trials"]})
    lines += ["", f"{len(rows[0]['trials'])} trials of {'/'.join(map(str, passes))} passes each."]
    return lines


def _recheck_note(r: dict[str, Any], rechecks: list[dict[str, Any]]) -> str:
    """For a training peer row whose cut inside a layer was re-measured (``--recheck``): what the
    re-measurement found for that cut, and how noisy the row's own passes were."""
    import numpy as np

    inside = [x for x in r.get("peer_stage_layers", {}).get("calibrated_again", []) if x != int(x)]
    rc = next((x for x in rechecks if x["model"] == r["model"] and x["k"] == r["k"]), None)
    if rc is None or len(inside) != 1 or int(inside[0]) != rc["layer"]:
        return ""
    j = round((inside[0] - rc["layer"]) * rc["layer_ops"])
    key, base = f"{rc['layer']}+{j}", f"{rc['layer']}+0"
    if key not in rc["predicted_ms"]:
        return ""
    trials = rc["trials"]
    meas = [max(t["plans"][key]["measured_ms"]) / max(t["plans"][base]["measured_ms"]) for t in trials]
    pred = [max(t["plans"][key]["predicted_now_ms"]) / max(t["plans"][base]["predicted_now_ms"]) for t in trials]
    d = [[float(np.median([t["plans"][key][f][i] - t["plans"][base][f][i] for t in trials]))
          for i in range(2)] for f in ("measured_ms", "predicted_now_ms")]
    ours = r["calibrated_again"]
    spread = [s / m for s, m in zip(ours["spread_ms"], ours["measured_ms"])]
    ops = ", ".join(x.removeprefix("aten.").removesuffix(".default") for x in rc["ops"][:j])
    passes = len(ours.get("passes_ms", [[]])[0]) or "few"
    return (f" Re-measured below ({len(trials)} trials of {trials[0]['passes']} passes; this cut moves {ops} of "
            f"layer {rc['layer']} to stage 0, `{key}`): against the cut between layers it measures "
            f"{100 * (float(np.median(meas)) - 1):+.1f}% (trials {100 * (min(meas) - 1):+.1f} to "
            f"{100 * (max(meas) - 1):+.1f}), the model predicts {100 * (float(np.median(pred)) - 1):+.1f}%; stage 0 "
            f"changes by {d[0][0]:+.1f} ms (predicted {d[1][0]:+.1f}), stage 1 by {d[0][1]:+.1f} ms (predicted "
            f"{d[1][1]:+.1f}): no cost of the cut that the model misses (not in the backward either: each stage "
            f"is timed forward+backward). The error above is the noise of this row's {passes} passes (a stage's half "
            f"interquartile range: {100 * min(spread):.0f}-{100 * max(spread):.0f}% of its time); the band shown is "
            "half the interquartile range of the bootstrap, a 50% interval, so a split just outside it is not rare.")


def _bottleneck_section(runs: list[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """Per forward row of each run: is the stage predicted slowest (same-pass prediction) the one
    measured slowest; if not, how far its measured time is from the slowest, against the noise
    band (half the interquartile range over the passes, where the run recorded it)."""
    lines = [
        "",
        "## Which stage is the bottleneck",
        "",
        "For each forward row of each run (`1`, `2`: the runs of the first tables; `peers`: the run of the peer "
        "table): the stage the calibrated model calls slowest at the speed of the moment (same passes) and the "
        "stage measured slowest. When they differ: the predicted one's measured time against the slowest, and "
        "the noise band of that difference (half the interquartile range of each stage's time over the passes, "
        "the two added in quadrature, over the slowest), and *paired*: whether the passes tell the two apart "
        "(`Measurement.bottleneck_ties`, `slowest_within_noise`: the measured slowest stage is slower than the "
        "predicted one in more than 95% of 2,000 bootstrap resamplings of the passes, each pass's difference "
        "taken within the pass so that the machine's speed cancels; `tied`: it is not). Runs that did not record "
        "their passes show `-` there.",
        "",
        "| run | model | k | predicted slowest | measured slowest | same | predicted one measured at | noise band "
        "| paired |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    miss, inside, total, before, tied, paired = 0, 0, 0, 0, 0, 0
    beyond: list[float] = []  # how far each miss outside its band is beyond it
    # a run that did not record the passes: the band the recording run measured on the same model and k
    # (the median stage's relative spread, for two stages)
    typical = {}
    for _, rows in runs:
        for r in rows:
            c = r.get("calibrated", {})
            if c.get("spread_ms"):
                rel = sorted(x / y for x, y in zip(c["spread_ms"], c["measured_ms"]) if y > 0)
                typical[(r["model"], r["k"])] = math.sqrt(2) * rel[len(rel) // 2]
    for name, rows in runs:
        for r in rows:
            c = r.get("calibrated")
            if c is None or "predicted_now_ms" not in c:
                continue
            total += 1
            pn, ms = c["predicted_now_ms"], c["measured_ms"]
            p, m = pn.index(max(pn)), ms.index(max(ms))
            passes = c.get("passes_ms")
            ties = slowest_within_noise(passes) if passes and len({len(x) for x in passes}) == 1 else None
            paired += ties is not None
            if p == m:
                tied += ties is not None
                lines.append(f"| {name} | {r['model']} | {r['k']} | {p} | {m} | yes | | | |")
                continue
            miss += 1
            before += m < p
            gap = ms[p] / ms[m] - 1
            sp = c.get("spread_ms")
            band = math.hypot(sp[p], sp[m]) / ms[m] if sp else typical.get((r["model"], r["k"]))
            if band is not None and -gap <= band:
                inside += 1
            elif band is not None:
                beyond.append(-gap - band)
            tied += ties is not None and p in ties
            verdict = "-" if ties is None else ("tied" if p in ties else "**apart**")
            lines.append(f"| {name} | {r['model']} | {r['k']} | {p} | {m} | no | {100 * gap:+.1f}% | "
                         + (f"+-{100 * band:.1f}%{'' if sp else ' (from the peers run)'} |"
                            if band is not None else "- |") + f" {verdict} |")
    # a stage kind or position the model always under-predicts would show as a one-sided ratio there
    rel: dict[str, list[float]] = {"first": [], "middle": [], "last": []}
    for _, rows in runs:
        for r in rows:
            x = r.get("calibrated", {}).get("ratios_now")
            if x:
                mean = sum(x) / len(x)
                rel["first"].append(x[0] / mean)
                rel["last"].append(x[-1] / mean)
                rel["middle"] += [v / mean for v in x[1:-1]]
    cals = [r["calibrated"] for _, rows in runs for r in rows if "calibrated" in r]
    rel_sp = [x / y for c in cals for x, y in zip(c.get("spread_ms", []), c["measured_ms"]) if y > 0]
    spreads = f"{100 * min(rel_sp):.0f}-{100 * max(rel_sp):.0f}%" if rel_sp else "-"
    lean = max((100 * abs(sorted(v)[len(v) // 2] - 1) for v in rel.values() if v), default=0.0)
    by_pos = "; ".join(f"{key} stages {100 * (sorted(v)[len(v) // 2] - 1):+.1f}% ({sum(y > 1 for y in v)} of "
                       f"{len(v)} above)" for key, v in rel.items() if v)
    lines += ["", f"The predicted bottleneck is the measured one on {total - miss} of {total} rows"
              + (f"; on {tied} of the {paired} rows whose passes were recorded it is the measured one or tied "
                 "with it in the paired test" if paired else "") + "; "
              f"{inside} of the {miss} misses are within their noise band (for runs `1` and `2`, which did not "
              "record the passes, the band the `peers` run measured on the same model and k: the median stage's "
              "spread, for two stages). Is a miss systematic? Each stage's same-pass ratio over its row's mean, "
              f"the median by position: {by_pos}. No position leans by more than {lean:.1f}%, inside the per-stage "
              f"noise band (half the interquartile range over the passes, {spreads} of a stage's time in the runs "
              "that recorded it), and the misses go both ways (the stage measured slowest is before the predicted "
              f"one in {before} of the {miss} misses, after it in the others)"
              + (f"; the {len(beyond)} misses outside their band are {100 * min(beyond):.1f}-"
                 f"{100 * max(beyond):.1f} points beyond it" if beyond else "")
              + ". So the calibration is left as it is: on this machine the bottleneck stage can be named only "
              "within that band, and where two stages are that close the plan's bottleneck is too (the peer "
              "table above shows what a miss costs)."]
    return lines


def _drift_section(rows: list[dict[str, Any]]) -> list[str]:
    """Why the calibrated model misses 0.85-1.15 against a calibration from another pass: the
    ratio as calibrated is the machine's drift times the same-pass ratio."""
    out, fix, drifts = [], [], []
    for r in rows:
        c = r["calibrated"]
        if c.get("drift") is None:
            continue
        for a in c["ratios"]:
            fix.append(a / c["drift"])
            if not 0.85 <= a <= 1.15:
                out.append(a)
                drifts.append(c["drift"])
    if not fix:
        return []
    dr = [r["calibrated"]["drift"] for r in rows if r["calibrated"].get("drift") is not None]
    return [
        "",
        "## Against a calibration from another pass",
        "",
        "The ratios *as calibrated* compare a stage timed now with node times fitted minutes earlier. On this "
        "machine the same segments take a different time minutes apart: the calibration's own segments, timed "
        f"again in the same passes as the stages, took {min(dr):.2f}-{max(dr):.2f}x their calibrated time "
        f"(*drift*, {len(dr)} rows over all runs). No per-operator model can absorb that: it is the machine's "
        "speed, not the model's shape. Over all runs, "
        f"{len(out)} of {len(fix)} stage ratios as calibrated fall outside 0.85-1.15 ({min(out, default=1):.2f}-"
        f"{max(out, default=1):.2f}, in rows whose drift is "
        + (f"{min(drifts):.2f}-{max(drifts):.2f}" if drifts else "-")
        + f"); divided by its row's drift, every as-calibrated ratio is {min(fix):.2f}-{max(fix):.2f} "
        f"({sum(0.85 <= x <= 1.15 for x in fix)} of {len(fix)} within 0.85-1.15). The 0.85-1.15 target holds "
        "against a calibration of the same pass (the *same passes* columns), and on a machine whose speed "
        "holds still between calibration and use; here it cannot be met from another pass.",
    ]


def _pipeline_section(doc: dict[str, Any]) -> list[str]:
    """The table of ``benches/bench_gloo_pipeline.py``'s JSON."""
    import statistics

    mb = doc["micro_batches"]
    lines = [
        "",
        "## A real pipeline: 2 gloo ranks, GPipe and 1F1B",
        "",
        "Regenerate: `python benches/bench_gloo_pipeline.py --json pipeline.json`, then pass "
        "`--pipeline pipeline.json` to `benches/bench_reality.py`. `torch.distributed.pipelining` with the gloo "
        f"backend, 2 processes of one thread each on this CPU, {mb} micro-batches, forward and backward (mean "
        "squared error against a random target, no optimizer step), eval mode (BatchNorm on its running "
        "statistics), random weights. `ours`: `partition_trace` on the training trace calibrated on measured "
        "segments (`t.calibrated(training=True)`), 2 stages; `uniform`: the model's layers split in two equal "
        "counts (DeepSpeed's `uniform`). Each step of each plan is timed in turn (ours, uniform, ours, ...) after "
        f"one warm-up step; {doc['steps']} timed steps per plan and schedule, medians. *CPU s/step*: process CPU "
        "seconds per step of rank 0 / rank 1; *steps/s*: one over the busier rank's CPU seconds, the rate on 2 "
        "cores of its own (the pipeline's bubble, the same for both plans, left out); *wall*: seconds per step "
        "as run here, where the 2 ranks shared 2 cores with other jobs (waiting for a core included).",
        "",
        "*predicted*: the calibrated forward+backward milliseconds of each stage per micro-batch (ours; "
        "uniform).",
        "",
        "| model (one micro-batch) | predicted ms | schedule | ours CPU s/step | uniform CPU s/step | ours steps/s | "
        "uniform steps/s | ours against uniform | wall s/step ours / uniform |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    imbalance: list[tuple[float, float]] = []
    for r in doc["rows"]:
        got: dict[tuple[str, str], list[dict[str, Any]]] = {}
        errors = [x.get("error") for rank in r["ranks"] for x in rank if not x.get("ok")]
        if errors:
            lines.append(f"| {r['model']} ({r['size']}) | | failed: {errors[0]} | | | | | | |")
            continue
        for rank in r["ranks"]:
            for x in rank:
                got.setdefault((x["plan"], x["schedule"]), []).append(x)
        for sched in ("gpipe", "1f1b"):
            cell = {}
            for plan in ("ours", "uniform"):
                xs = got[(plan, sched)]
                cpu = [statistics.median(x["cpu_s"]) for x in xs]
                wall = max(statistics.median(x["wall_s"]) for x in xs)
                cell[plan] = (cpu, wall, 1.0 / max(cpu))
            o, u = cell["ours"], cell["uniform"]
            pm = r["predicted_ms"]
            pred = "; ".join(" / ".join(f"{v:.0f}" for v in pm[p]) for p in ("ours", "uniform"))
            imbalance.append((max(o[0]) / min(o[0]), max(pm["ours"]) / min(pm["ours"])))
            lines.append(
                f"| {r['model']} ({r['size']}) | {pred} | {'GPipe' if sched == 'gpipe' else '1F1B'} | "
                f"{o[0][0]:.2f} / {o[0][1]:.2f} | {u[0][0]:.2f} / {u[0][1]:.2f} | {o[2]:.3f} | {u[2]:.3f} | "
                f"{100 * (o[2] / u[2] - 1):+.0f}% | {o[1]:.1f} / {u[1]:.1f} |")
    if imbalance:
        lines += [
            "",
            "Our plans' busier rank over the other, in CPU seconds per step: "
            f"{min(m for m, _ in imbalance):.2f}-{max(m for m, _ in imbalance):.2f} (predicted "
            f"{min(p for _, p in imbalance):.2f}-{max(p for _, p in imbalance):.2f}). The stage model times each "
            "stage's forward and backward alone; the real pipeline adds what it costs each rank to send and "
            "receive with gloo, to run the schedule and to copy what the runtime copies, which the model does not "
            "charge.",
        ]
    return lines


def markdown(rows: list[dict[str, Any]], repeat: int, depth: list[dict[str, Any]] | None = None,
             second: list[dict[str, Any]] | None = None, pipeline: dict[str, Any] | None = None,
             twice: list[dict[str, Any]] | None = None, peers: list[dict[str, Any]] | None = None,
             peers_training: list[dict[str, Any]] | None = None,
             recheck: list[dict[str, Any]] | None = None) -> str:
    cpu = platform.processor() or platform.machine()
    extra = " --peers-training pytorch_runs/peers_training.json" if peers_training else ""
    import torch

    lines = [
        "# The PyTorch path against measurement",
        "",
        "Regenerate (in `benches/`, each run writing its JSON into `pytorch_runs/`, as kept in the repository): "
        f"`python bench_reality.py --no-peers --depths --repeat {repeat} --json pytorch_runs/run1.json`, "
        f"`python bench_reality.py --no-peers --no-training --repeat {repeat} --json pytorch_runs/run2.json` (the "
        "same forward measurements again, to show their stability, and the exact-plan table), `python "
        "bench_reality.py --twice --json pytorch_runs/twice.json`, `python bench_gloo_pipeline.py --steps 2 "
        "--repeat 2 --json pytorch_runs/pipeline.json`, then `python bench_reality.py --from pytorch_runs/run1.json "
        f"pytorch_runs/run2.json pytorch_runs/twice.json{' pytorch_runs/recheck.json' if recheck else ''} "
        "--pipeline pytorch_runs/pipeline.json --peers "
        f"pytorch_runs/peers.json{extra} --repeat {repeat} --markdown ../docs/results/pytorch.md`, the peer runs "
        "made with the commands in their sections. On a machine with a GPU, `--device cuda` times with CUDA "
        "events (and `bench_gloo_pipeline.py --device cuda` runs NCCL, one GPU per rank): written, but not run by this "
        "project (its machines have no GPU); without CUDA both refuse the option in one line.",
        "",
        f"Conditions: CPU ({cpu}), torch {torch.__version__}, `torch.set_num_threads(1)`, random weights, eval "
        "mode; GPT-style stack of 12 layers (d_model 256, 4 heads, 64 tokens, batch 2), "
        "torchvision ResNet-50 (batch 1, 224x224) and Inception-v3 (batch 1, 299x299). Stage times are the median "
        "thread CPU time of passes over the built stages in order (`split_module` of the `torch.export` program), "
        "after warm-up, the cost of calling an empty piece subtracted. The machine is a 2-core virtual machine on "
        "a shared host. Every `bench_reality.py` run ran pinned to one core (`taskset -c 0`) with the other core "
        "busy with one other job; the pipeline's two ranks used both cores, one of them shared with that job "
        "(its measure is CPU seconds per step, which sharing a core does not inflate). Even on the pinned "
        "core the same code's speed moves by "
        "up to ~40% between seconds in CPU time (the host's caches and memory bandwidth are shared; the *drift* "
        "columns show it between minutes), so compare ratios within a pass, not milliseconds across rows.",
        "",
        "How to get these plans and checks on your own model:",
        "",
        "```python",
        "import torch, stagecut.torch",
        "from stagecut.frontends.program_order import partition_trace",
        "torch.set_num_threads(1)                      # stage times are thread CPU times",
        "model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())",
        "                              for _ in range(8)])   # your model and one batch here",
        "x = torch.randn(16, 64)",
        "t = stagecut.torch.trace(model, (x,), bandwidth=\"10GB/s\")",
        "tc = t.calibrated()                           # node times fitted on measured segments",
        "plan = partition_trace(tc, 4)                 # optimal over the family in plan.stats['family']",
        "print(tc.measure(plan).table())               # each stage built and timed: predicted vs measured",
        "plan, measurement, _ = tc.refine(plan, 4)     # re-plan on measured stage times",
        "tt = t.calibrated(training=True)              # forward and backward calibrated: a training trace",
        "print(tt.measure(partition_trace(tt, 4)).table())   # forward+backward of each stage",
        "```",
        "",
        "On a GPU (written, not run here: this project's machines have no GPU, and its tests check only that "
        "the path refuses cleanly without CUDA and reads CUDA events' milliseconds right): "
        "`t.calibrated(device=\"cuda\")` copies the model and inputs to the GPU and times each segment between "
        "two CUDA events on the current stream (synchronised after each call), and `tc.measure(plan)` / "
        "`tc.refine(plan, k)` then time on the device the trace was calibrated on (another device is refused: "
        "times on two devices do not compare). Without CUDA, `device=\"cuda\"` raises `BackendUnavailableError` "
        "in one line; `bench_reality.py --device cuda` and `bench_gloo_pipeline.py --device cuda` (NCCL, one GPU "
        "per rank, wall time between `torch.cuda.synchronize()` calls) exit 2 with one line.",
        "",
        "## Predicted vs measured, per stage (forward)",
        "",
        "`flops`: plan and prediction from FLOPs at a nominal rate (the scale is arbitrary: only the spread "
        "of the ratios matters). `calibrated`: node times fitted on 32 measured segments "
        "(`t.calibrated()`), ratio = measured / predicted, the prediction as calibrated minutes earlier. "
        "*drift*: the calibration's segments timed again in the same passes as the stages, over their time at "
        "calibration (the machine's speed now against then). *same passes*: measured over the calibrated "
        "prediction at the speed of each pass (`StageTiming.ratio_now`: each segment's node times rescaled to "
        "that segment's time in the same pass; the median over the passes): the model's error with the "
        "machine's drift taken out. *bottleneck*: the stage measured slowest is the one the same-pass "
        "prediction calls slowest (`yes`), or was predicted within 5% of it (`tie`); in parentheses, the "
        "stage predicted slowest measured against the slowest.",
        "",
    ]

    def ratios(r: dict[str, Any], key: str = "ratios") -> str:
        return " / ".join(f"{x:.2f}" for x in r[key])

    def bott(r: dict[str, Any], now: bool = True) -> str:
        if now and "same_bottleneck_now" in r:
            if r["same_bottleneck_now"]:
                return "yes"
            pn, ms = r["predicted_now_ms"], r["measured_ms"]
            gap = 100 * (ms[pn.index(max(pn))] / max(ms) - 1)
            return f"{'tie' if r['bottleneck_now_within_5pct'] else '**no**'} ({gap:+.0f}%)"
        return "yes" if r["same_bottleneck"] else ("tie" if r["bottleneck_within_5pct"] else "**no**")

    def spread(rs: list[dict[str, Any]], key: str) -> str:
        xs = [x for r in rs for x in r.get(key, [])]
        inside = sum(0.85 <= x <= 1.15 for x in xs)
        return f"{min(xs):.2f}-{max(xs):.2f} ({inside} of {len(xs)} stages within 0.85-1.15)" if xs else "-"

    has_refined = any("refined" in r for r in rows)
    head = "| model | k | flops ratios | calibrated ratios | drift | same passes | bottleneck |"
    lines += [head + (" refined ratios |" if has_refined else ""),
              "|---|---|---|---|---|---|---|" + ("---|" if has_refined else "")]
    for r in rows:
        c = r["calibrated"]
        lines.append(f"| {r['model']} | {r['k']} | {ratios(r['flops'])} | {ratios(c)} | {c.get('drift', 0):.2f} | "
                     f"{ratios(c, 'ratios_now')} | {bott(c)} |" + (f" {ratios(r['refined'])} |" if has_refined
                                                                   and 'refined' in r else ""))
    cal_rows = [r["calibrated"] for r in rows if "calibrated" in r]
    lines += ["", f"Same-pass ratios over all rows: {spread(cal_rows, 'ratios_now')}; as calibrated: "
              f"{spread(cal_rows, 'ratios')}."]
    if second:
        by = {(r["model"], r["k"]): r for r in second}
        lines += [
            "",
            "## Run to run",
            "",
            "The same measurements made again (a second run of the command with a fresh calibration, some minutes "
            "later):",
            "",
            "| model | k | first run: as calibrated | drift | same passes | bottleneck | second run: as calibrated | "
            "drift | same passes | bottleneck |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            o = by.get((r["model"], r["k"]))
            if o is None:
                continue
            c, d = r["calibrated"], o["calibrated"]
            lines.append(f"| {r['model']} | {r['k']} | {ratios(c)} | {c.get('drift', 0):.2f} | "
                         f"{ratios(c, 'ratios_now')} | {bott(c)} | {ratios(d)} | {d.get('drift', 0):.2f} | "
                         f"{ratios(d, 'ratios_now')} | {bott(d)} |")
        both = cal_rows + [o["calibrated"] for o in second]
        lines += ["", f"Same-pass ratios over both runs: {spread(both, 'ratios_now')}; as calibrated: "
                  f"{spread(both, 'ratios')}."]
    train = [r for r in rows if "training" in r]
    if train:
        lines += [
            "",
            "## Forward and backward (training)",
            "",
            "`t.calibrated(training=True)`: each segment's forward (autograd on) and backward timed, a backward/"
            "forward factor fitted per operator kind (non-negative least squares over the segments), each node's "
            "backward time its kind's factor times its forward time, scaled to its segment's measured backward. "
            "The stages of the plan made on that training trace are built and timed forward then backward "
            "(inputs as leaves that require grad, a gradient of ones from every output). *2x plan*: the plan "
            "made with the usual rule (backward = 2x forward) timed in the same passes (`same` when it is the "
            "same plan).",
            "",
            "| model | k | backward/forward by kind | ratios, as calibrated | drift | same passes | bottleneck | "
            "measured bottleneck ms | 2x plan |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in train:
            c = r["training"]
            f = r["backward_factors"]
            fac = ", ".join(f"{kk} {v:.2f}" for kk, v in f.items() if kk != "view" and (kk != "conv" or v > 0))
            ours = c["measured_max_ms"]
            if r["training_2x_same_plan"]:
                other = "same"
            else:
                v = r["training_2x"]["measured_max_ms"]
                other = f"{v:.1f} ({100 * (v / ours - 1):+.0f}%)"
            lines.append(f"| {r['model']} | {r['k']} | {fac} | {ratios(c)} | {c.get('drift', 0):.2f} | "
                         f"{ratios(c, 'ratios_now')} | {bott(c)} | {ours:.1f} | {other} |")
        tr = [r["training"] for r in train]
        lines += ["", f"Same-pass ratios over the training rows: {spread(tr, 'ratios_now')}."]
    peer_rows = peers if peers is not None else [r for r in rows if "calibrated_again" in r]
    if peer_rows:
        lines += _peer_section(peer_rows)
    lines += _peer_section(peers_training or [], training=True, recheck=recheck)
    if recheck:
        lines += _recheck_section(recheck)
    lines += _bottleneck_section([("1", rows), ("2", second or []), ("peers", peers or [])])
    lines += _drift_section([r for src in (rows, second or [], peers or []) for r in src if "calibrated" in r])
    if twice:
        lines += [
            "",
            "## `cost=\"measure\"` traced twice",
            "",
            "Each operator timed alone (`stagecut.torch.trace(..., cost=\"measure\", repeat=5, seed=0)`: the median "
            "thread CPU time of 5 runs per operator), the same model traced twice a few seconds apart. *spread*: "
            "what each trace reports in `timing_spread` (half the interquartile range of the runs, weighted by "
            "time). *cross*: the first trace's plan scored on the second trace's times, above the second trace's "
            "optimum. Per-operator timing charges each operator the cost of a call and leaves its caches cold, "
            "so it over-predicts stages (the `flops`-scale problem of the table above); `t.calibrated()` is the "
            "model to plan on.",
            "",
            "| model | k | spread (trace 1 / trace 2) | same plan | cross |",
            "|---|---|---|---|---|",
        ]
        for r in twice:
            lines.append(f"| {r['model']} | {r['k']} | +-{100 * r['spread'][0]:.1f}% / +-{100 * r['spread'][1]:.1f}% "
                         f"| {'yes' if r['same_plan'] else 'no'} | +{100 * r['cross']:.1f}% |")
    if pipeline:
        lines += _pipeline_section(pipeline)
    if depth:
        lines += [
            "",
            "## Exact plans for deep transformer stacks",
            "",
            "`partition_trace(trace, k)` (family `auto`) on GPT-style stacks at operator level (d_model 64, FLOP "
            "times; `training`: a backward node per operator at 2x its forward time), CPU seconds of the call. "
            "*contiguous*: optimal over every contiguous split (the exact DP after the contraction, every merge "
            "provably keeping an optimum); *attached*: optimal over the contiguous splits that keep each mask "
            "slice, position index and constant with the operator it feeds, with a lower bound over every "
            "contiguous split: the restriction costs at most the percentage shown.",
            "",
            "| layers | pass | k | nodes | family | status | restriction costs at most | ideals | CPU s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in depth:
            cost = r["restriction_cost"]
            lines.append(f"| {r['layers']} | {'training' if r['training'] else 'forward'} | {r['k']} | {r['nodes']} | "
                         f"{r['family']} | {r['status']} | {100 * cost:.4f}% | {r['ideals']} | {r['cpu_s']} |")
    return "\n".join(lines) + "\n"


def twice_rows(models: list[str], ks: list[int], repeat: int = 5) -> list[dict[str, Any]]:
    """``cost="measure"`` (each node timed alone) twice on each model: the spread each trace
    reports, whether the two traces give the same plan, and the first trace's plan scored on the
    second's times against the second's optimum."""
    import torch

    from stagecut.frontends.torch import trace_torch

    torch.set_num_threads(1)
    out = []
    for name in models:
        model, args = build(name)
        ts = [trace_torch(model, args, bandwidth="10GB/s", timing="measure", repeat=repeat, seed=0) for _ in range(2)]
        for k in ks:
            a, b = (partition_trace(t, k) for t in ts)
            cross = sc.evaluate(ts[1].graph, a.device_of(), devices=k).objective / b.objective - 1
            out.append({"model": name, "k": k, "spread": [round(t.timing_spread or 0.0, 4) for t in ts],
                        "same_plan": a.assignment() == b.assignment(), "cross": round(cross, 4)})
            print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


# ----------------------------------------------------------------------------- re-measuring a cut
def recheck_rows(models: list[str], trials: int, repeat: int) -> list[dict[str, Any]]:
    """Two stages, forward+backward, on the calibrated training trace: our plan's cut inside a layer against
    the cut between layers just before it, and each cut in between (after 1, 2, ... operators of
    that layer), every split timed in the same passes, ``trials`` times over (``3 * repeat``
    passes each): what each split's slowest stage measures against the cut between layers, pass
    by pass, next to what the calibrated model predicts."""
    import numpy as np
    import torch

    from stagecut.frontends.split import stage_of_nodes

    torch.set_num_threads(1)
    out = []
    for name in models:
        model, args = build(name)
        from stagecut.frontends.torch import trace_torch

        t = trace_torch(model, args, bandwidth="10GB/s", flops_per_s=1e10)
        tt = t.calibrated(warmup=2, repeat=repeat, training=True)
        layers = layers_of(tt, model)
        for k in (2,):
            ours = partition_trace(tt, k)
            stage = stage_of_nodes(ours, tt)
            # the cut after stage 0 of ours: the first layer holding a node of stage 1, and how many
            # of its operators (in program order) stage 0 runs
            at = next(j for j, layer in enumerate(layers) if any(stage[v] > 0 for v in layer))
            inside = sum(stage[v] == 0 for v in layers[at])
            top = max(inside, 2)
            plans: dict[str, Plan] = {}
            for j in range(top + 1):
                split = [v for layer in layers[:at] for v in layer] + layers[at][:j]
                first = set(split)
                rest = [v for v in tt.order if v not in first]
                plans[f"{at}+{j}"] = manual_plan(tt, _with_backward(tt, [split, rest]), f"cut {at}+{j}")
            rows: dict[str, Any] = {"model": name, "k": k, "layer": at, "ours_ops": inside,
                                    "ops": [tt.targets[v] for v in layers[at][:top]],
                                    "layer_ops": len(layers[at]), "trials": []}
            for key, pl in plans.items():
                rows.setdefault("predicted_ms", {})[key] = [round(1e3 * s.compute, 3) for s in pl.stages]
            for trial in range(trials):
                c0 = time.process_time()
                ms = measure_many(tt, plans, repeat=repeat, reference=True)
                base = np.array([s.passes for s in ms[f"{at}+0"].stages]).max(axis=0)
                rec = {}
                for key, m in ms.items():
                    mx = np.array([s.passes for s in m.stages]).max(axis=0)
                    rec[key] = {"measured_ms": [round(1e3 * s.measured, 3) for s in m.stages],
                                "predicted_now_ms": [round(1e3 * (s.predicted_now or 0.0), 3) for s in m.stages],
                                "against_first": round(float(np.median(mx / base)), 4),
                                "against_first_iqr": [round(float(x), 4) for x in np.percentile(mx / base, [25, 75])]}
                rows["trials"].append({"plans": rec, "passes": len(ms[f"{at}+0"].stages[0].passes),
                                       "cpu_s": round(time.process_time() - c0, 1)})
                print(json.dumps({"model": name, "k": k, "trial": trial, **rows["trials"][-1]}), file=sys.stderr,
                      flush=True)
            out.append(rows)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    ap.add_argument("--k", nargs="+", type=int, default=[2, 4])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--markdown", type=pathlib.Path)
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--depths", nargs="*", type=int, default=[12, 48, 96],
                    help="GPT depths for the exact-plan table (none: skip it)")
    ap.add_argument("--device", default="cpu",
                    help="cpu (thread CPU time), or cuda / cuda:N: calibrate and time with CUDA events (not run "
                         "by this project: no GPU where it runs; refused where CUDA is absent)")
    ap.add_argument("--no-peers", action="store_true", help="skip refine and the peer splits")
    ap.add_argument("--no-training", action="store_true", help="skip the forward+backward rows")
    ap.add_argument("--twice", action="store_true", help="only: cost='measure' traced twice per model")
    ap.add_argument("--recheck", action="store_true",
                    help="only: k = 2, forward+backward, our cut against the cuts between it and the layer "
                         "boundary before it, --trials times")
    ap.add_argument("--trials", type=int, default=5, help="--recheck: how many times to time the splits")
    ap.add_argument("--peers", type=pathlib.Path,
                    help="the --json of a run with the peers (and --no-training): its peer table goes in the page")
    ap.add_argument("--peers-training", type=pathlib.Path,
                    help="the --json of a --no-forward run with the peers: its forward+backward peer table")
    ap.add_argument("--no-forward", action="store_true", help="only the forward+backward rows")
    ap.add_argument("--pipeline", type=pathlib.Path,
                    help="the --json of benches/bench_gloo_pipeline.py: its table goes in the page")
    ap.add_argument("--from", dest="sources", nargs="+", type=pathlib.Path,
                    help="run nothing: the --json files of earlier runs (the first run's rows are the main tables, "
                         "a second run's the run-to-run table; depth and --twice rows from whichever has them)")
    a = ap.parse_args(argv)
    if not a.sources:
        from stagecut.errors import StagecutError
        from stagecut.frontends.piece_timing import check_device

        try:
            a.device = check_device(a.device)
        except StagecutError as e:
            ap.error(str(e))
    if a.sources:
        docs = [json.loads(p.read_text()) for p in a.sources]
        rows = docs[0].get("rows", [])
        second = next((d["rows"] for d in docs[1:] if d.get("rows")), None)
        depth = next((d["depth"] for d in docs if d.get("depth")), [])
        twice = next((d["twice"] for d in docs if d.get("twice")), [])
        recheck = next((d["recheck"] for d in docs if d.get("recheck")), [])
    else:
        twice = twice_rows(a.models, a.k) if a.twice else []
        recheck = recheck_rows(a.models, a.trials, a.repeat) if a.recheck else []
        depth = depth_rows(a.depths, a.k) if a.depths and not (a.twice or a.recheck) else []
        rows, second = [], None
        if a.models and not (a.twice or a.recheck):  # the forward rows of every model first, then the training rows

            def save(partial: list[dict[str, Any]], done: list[dict[str, Any]] = rows) -> None:
                if a.json:
                    a.json.write_text(json.dumps({"rows": done + partial, "depth": depth, "partial": True}, indent=1))

            if a.no_forward:
                rows += run(a.models, a.k, a.repeat, peers=not a.no_peers, forward=False, on_row=save,
                            device=a.device)
            else:
                rows += run(a.models, a.k, a.repeat, peers=not a.no_peers, training=False, on_row=save,
                            device=a.device)
            if not a.no_training and not a.no_forward:
                by = {(r["model"], r["k"]): r for r in rows}

                def merge(partial: list[dict[str, Any]]) -> None:
                    r = partial[-1]
                    by[(r["model"], r["k"])].update({k: v for k, v in r.items() if k not in ("model", "k", "nodes")})
                    save([])

                run(a.models, a.k, a.repeat, peers=not a.no_peers, forward=False, on_row=merge, device=a.device)
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "depth": depth, "twice": twice, "recheck": recheck}, indent=1))
    if a.no_forward and not a.sources:  # no forward rows: the run is a record for --peers-training
        print(f"forward+backward rows written to {a.json}: pass it as --peers-training to a --from run"
              if a.json else json.dumps(rows), file=sys.stderr)
        return 0
    pipeline = json.loads(a.pipeline.read_text()) if a.pipeline else None
    peers = json.loads(a.peers.read_text())["rows"] if a.peers else None
    peers_training = json.loads(a.peers_training.read_text())["rows"] if a.peers_training else None
    text = markdown(rows, a.repeat, depth, second, pipeline, twice, peers, peers_training, recheck)
    if a.markdown:
        a.markdown.parent.mkdir(parents=True, exist_ok=True)
        a.markdown.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
