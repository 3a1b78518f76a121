"""stagecut.plot: the drawn artists carry the result's numbers (bar heights = stage loads and
their parts, node positions = topological generations, Gantt bars = starts and durations,
one distinct colour per stage), the DOT text parses back to the graph and the plan, PNGs are
written atomically, and the CLI's --plot draws the result it prints."""

import dataclasses
import json
import os
import re
import stat
import sys

import matplotlib
import networkx as nx
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.colors import to_hex

import stagecut as sc
from stagecut import examples, plot
from stagecut.cli.main import main
from stagecut.errors import BackendUnavailableError, InvalidArgumentError
from stagecut.latency import Devices, LatencyProblem, evaluate_schedule, place
from stagecut.mtpp import slice_graph
from stagecut.results import Stage

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def dag():
    return examples.random_dag(14, edge_prob=0.3, seed=3)


@pytest.fixture(scope="module")
def plan(dag):
    return sc.partition(dag, devices=3, cpus=0)


def _stacks(ax):
    """{container label: [(x, bottom, height), ...]}"""
    return {c.get_label(): [(b.get_x() + b.get_width() / 2, b.get_y(), b.get_height()) for b in c]
            for c in ax.containers}


def _hline_levels(ax):
    return [ln.get_ydata()[0] for ln in ax.lines if len(set(ln.get_ydata())) == 1 and ln.get_linestyle() == "--"]


# ----------------------------------------------------------------------------- colours
@pytest.mark.parametrize("k", [0, 1, 3, 10, 11, 20, 21, 64, 400])
def test_stage_colors_are_distinct_hex(k):
    colors = plot.stage_colors(k)
    assert len(colors) == k == len(set(colors))
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colors)


@pytest.mark.parametrize("k", [-1, 2.0, True, "3"])
def test_stage_colors_rejects_bad_k(k):
    with pytest.raises(InvalidArgumentError, match="^k:"):
        plot.stage_colors(k)


# -------------------------------------------------------------------------- stage bars
def test_one_plan_bars_are_the_stage_parts_stacked_to_the_load(plan):
    ax = plot.plot_stages(plan)
    stacks = _stacks(ax)
    assert list(stacks) == ["compute", "communication"]
    for j, s in enumerate(plan.stages):
        x0, b0, h0 = stacks["compute"][j]
        x1, b1, h1 = stacks["communication"][j]
        assert x0 == pytest.approx(j) and x1 == pytest.approx(j)
        assert (b0, h0) == pytest.approx((0.0, s.parts["compute"]))
        assert (b1, h1) == pytest.approx((s.parts["compute"], s.parts["comm"]))
        assert b1 + h1 == pytest.approx(s.load)
    assert _hline_levels(ax) == [pytest.approx(plan.lower_bound)]
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(j) for j in range(len(plan.stages))]
    faces = {to_hex(b.get_facecolor()) for c in ax.containers for b in c}
    assert len(faces) == 2   # one colour per part


def test_several_plans_side_by_side_with_a_legend(dag):
    plans = {m: sc.partition(dag, devices=3, cpus=0, method=m) for m in ("dp", "local-search", "pipedream")}
    ax = plot.plot_stages(plans, lower_bound=1.5)
    stacks = _stacks(ax)
    assert list(stacks) == [f"{m}: {p}" for m in plans for p in ("compute", "communication")]
    xs = {}
    for m, r in plans.items():
        comp, comm = stacks[f"{m}: compute"], stacks[f"{m}: communication"]
        assert len(comp) == len(r.stages)
        for j, s in enumerate(r.stages):
            assert comp[j][2] + comm[j][2] == pytest.approx(s.load)
            assert comm[j][1] == pytest.approx(comp[j][2])
            assert round(comp[j][0]) == j
        xs[m] = [x for x, _, _ in comp]
    assert xs["dp"][0] < xs["local-search"][0] < xs["pipedream"][0]   # side by side, in the given order
    assert _hline_levels(ax) == [1.5]   # the given bound wins over the plans'
    plan_colors = [to_hex(ax.containers[2 * i][0].get_facecolor()) for i in range(3)]
    assert len(set(plan_colors)) == 3
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"dp", "local-search", "pipedream", "compute", "communication"} <= set(legend)


def test_a_list_of_plans_is_labelled_by_method_and_numbered_when_repeated(dag):
    a = sc.partition(dag, devices=2, cpus=0)
    ax = plot.plot_stages([a, a])
    assert [c.get_label() for c in ax.containers][::2] == [f"{a.method} #0: compute", f"{a.method} #1: compute"]


def test_mtpp_parts_and_missing_parts_are_stacked(dag):
    sp = slice_graph(dag, devices=3, method="order", memory=20.0, bandwidth=2.0)
    ax = plot.plot_stages(sp)
    stacks = _stacks(ax)
    assert list(stacks)[:2] == ["compute (work)", "communication (io)"]
    for j, s in enumerate(sp.stages):
        assert sum(h for label in stacks for (_, _, h) in [stacks[label][j]]) == pytest.approx(s.load)
    # a stage whose parts do not add up to its load gets the rest as its own segment
    odd = dataclasses.replace(sp, stages=(Stage(index=0, device="x", nodes=(0,), load=5.0, parts={"comm": 1.0}),))
    stacks = _stacks(plot.plot_stages(odd))
    assert [(k, v[0][2]) for k, v in stacks.items()] == [("communication", 1.0), ("rest of the load", 4.0)]


def test_stages_without_parts_are_one_load_bar(schedule):
    stacks = _stacks(plot.plot_stages(schedule))
    assert list(stacks) == ["load"]
    assert [h for _, _, h in stacks["load"]] == pytest.approx([s.load for s in schedule.stages])


def test_an_infeasible_plan_draws_no_bars():
    r = sc.partition(sc.Graph.chain([1.0, 1.0], memory=[5.0, 5.0]), devices=1, cpus=0, memory=6.0)
    assert r.objective is None
    ax = plot.plot_stages(r)
    assert "no stages" in ax.get_title()
    assert all(len(c) == 0 for c in ax.containers)


@pytest.mark.parametrize("bad, field", [
    (42, "plan_or_plans"), ([], "plan_or_plans"), ({"a": 3}, r"plan_or_plans\[a\]"), ("dp", "plan_or_plans"),
])
def test_plot_stages_rejects_what_is_not_a_plan(bad, field):
    with pytest.raises(InvalidArgumentError, match=f"^{field}"):
        plot.plot_stages(bad)


@pytest.mark.parametrize("bound", [-1.0, float("nan"), float("inf"), "2", True])
def test_plot_stages_rejects_a_bad_lower_bound(plan, bound):
    with pytest.raises(InvalidArgumentError, match="^lower_bound:"):
        plot.plot_stages(plan, lower_bound=bound)


def test_plot_stages_rejects_a_negative_part(plan):
    bad = dataclasses.replace(plan, stages=(Stage(index=0, device="x", nodes=(0,), load=1.0, parts={"comm": -1.0}),))
    with pytest.raises(InvalidArgumentError, match=r"stages\[0\]\.parts\['comm'\]"):
        plot.plot_stages(bad)


def test_plot_stages_draws_into_a_given_axes(plan):
    fig, (left, right) = plt.subplots(1, 2)
    assert plot.plot_stages(plan, ax=right) is right
    assert len(left.containers) == 0 and len(right.containers) == 2


# ------------------------------------------------------------------------------- graph
def test_graph_nodes_sit_at_their_generation_coloured_by_stage(dag, plan):
    ax = plot.plot_graph(dag, plan)
    edges, nodes = ax.collections[0], ax.collections[1]
    offsets = nodes.get_offsets()
    g = dag.to_networkx()
    gen = {v: i for i, layer in enumerate(nx.topological_generations(g)) for v in layer}
    assert [p[0] for p in offsets] == [gen[n.id] for n in dag.nodes]
    positions = {(float(x), float(y)) for x, y in offsets}
    assert len(positions) == len(dag.nodes)   # no two nodes on top of each other
    colors = plot.stage_colors(len(plan.stages))
    stage_of = plan.assignment()
    faces = [to_hex(c) for c in nodes.get_facecolors()]
    assert faces == [colors[stage_of[n.id]] for n in dag.nodes]
    assert len(set(faces)) == len(plan.stages)
    segs = edges.get_segments()
    assert len(segs) == len(dag.edges)
    for seg in segs:
        assert seg[0][0] < seg[1][0]   # every edge goes forward in the layering
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"stage {j} ({s.device})" for j, s in enumerate(plan.stages)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layout_is_the_topological_generations_on_random_graphs(seed):
    g = examples.regal_graph(40, seed=seed)
    gen = {v: i for i, layer in enumerate(nx.topological_generations(g.to_networkx())) for v in layer}
    pos = plot.layout(g)
    assert [x for x, _ in pos] == [gen[n.id] for n in g.nodes]
    assert len(set(pos)) == len(pos)


def test_graph_from_a_mapping_with_unassigned_nodes(dag, plan):
    # {node: stage index} colours as the plan does
    same = [to_hex(c) for c in plot.plot_graph(dag, plan).collections[1].get_facecolors()]
    by_index = [to_hex(c) for c in plot.plot_graph(dag, plan.assignment()).collections[1].get_facecolors()]
    assert by_index == same
    # any stage names (here (kind, index) pairs), one node left out: grey, the rest one colour per device
    device_of = plan.device_of()
    partial = {v: d for v, d in device_of.items() if v != dag.nodes[-1].id}
    ax = plot.plot_graph(dag, partial)
    faces = [to_hex(c) for c in ax.collections[1].get_facecolors()]
    assert faces[-1] == plot.UNASSIGNED
    pairs = {(device_of[n.id], f) for n, f in zip(dag.nodes[:-1], faces[:-1])}
    assert len(pairs) == len({d for d, _ in pairs}) == len({f for _, f in pairs})
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"{k}:{i}" for k, i in sorted(set(partial.values()))] + ["no stage"]


def test_plot_graph_rejects_bad_input(dag, plan):
    with pytest.raises(InvalidArgumentError, match="^graph:"):
        plot.plot_graph(dag.to_networkx(), plan)
    with pytest.raises(InvalidArgumentError, match="^plan: node 99"):
        plot.plot_graph(dag, {99: 0})
    with pytest.raises(InvalidArgumentError, match="^plan:"):
        plot.plot_graph(dag, [0, 1])


def _parse_dot(text):
    nodes = dict(re.findall(r'^  ("(?:[^"\\]|\\.)*") \[(.*)\];$', text, flags=re.M))
    edges = re.findall(r'^  ("(?:[^"\\]|\\.)*") -> ("(?:[^"\\]|\\.)*");$', text, flags=re.M)
    attrs = {k: dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*")', v)) for k, v in nodes.items()}
    return attrs, edges


def test_dot_text_parses_back_to_the_graph_and_the_plan(dag, plan):
    text = plot.to_dot(dag, plan)
    assert text.startswith('digraph "stagecut" {') and text.endswith("}")
    attrs, edges = _parse_dot(text)
    assert set(attrs) == {f'"{n.id}"' for n in dag.nodes}
    assert sorted(edges) == sorted((f'"{u}"', f'"{v}"') for u, v in dag.edges)
    colors = plot.stage_colors(len(plan.stages))
    for v, s in plan.assignment().items():
        assert attrs[f'"{v}"']["stage"] == f'"{s}"'
        assert attrs[f'"{v}"']["fillcolor"] == f'"{colors[s]}"'


def test_dot_quotes_odd_ids_and_needs_no_matplotlib(monkeypatch):
    g = sc.Graph([sc.Node('a"b', {"accelerator": 1.0}), sc.Node("c\\d", {"accelerator": 1.0}),
                  sc.Node("e", {"accelerator": 1.0})], [('a"b', "c\\d"), ("c\\d", "e")])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    text = plot.to_dot(g, {'a"b': 0, "c\\d": 1})
    attrs, edges = _parse_dot(text)
    assert set(attrs) == {r'"a\"b"', r'"c\\d"', '"e"'}
    assert edges == [(r'"a\"b"', r'"c\\d"'), (r'"c\\d"', '"e"')]
    assert attrs['"e"']["fillcolor"] == '"#d9d9d9"'   # no stage
    assert attrs[r'"a\"b"']["fillcolor"] != attrs[r'"c\\d"']["fillcolor"]


# ---------------------------------------------------------------------------- schedule
@pytest.fixture(scope="module")
def schedule(dag):
    return place(LatencyProblem(dag, Devices.pcie_star(2), None), method="heft")


def test_gantt_bars_are_the_schedule(schedule):
    ax = plot.plot_schedule(schedule)
    nodes, transfers = ax.containers
    assert nodes.get_label() == "nodes" and transfers.get_label() == "transfers"
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert set(rows) == set(schedule.placement.values()) | {t.target for t in schedule.transfers}
    assert rows == [d for d in schedule.devices if d in rows]
    for bar, (v, d) in zip(nodes, schedule.placement.items()):
        assert bar.get_x() == pytest.approx(schedule.start[v])
        assert bar.get_width() == pytest.approx(schedule.finish[v] - schedule.start[v])
        assert bar.get_y() + bar.get_height() / 2 == pytest.approx(rows.index(d))
        on_path = v in schedule.critical_path
        assert (to_hex(bar.get_edgecolor()) == "#000000") == on_path
    assert len(transfers) == len(schedule.transfers) > 0
    for bar, t in zip(transfers, schedule.transfers):
        assert (bar.get_x(), bar.get_width()) == pytest.approx((t.start, t.finish - t.start))
        assert round(bar.get_y()) == rows.index(t.target)
        assert bar.get_height() < nodes[0].get_height()   # thin
    by_row = {}
    for bar, d in zip(nodes, schedule.placement.values()):
        by_row.setdefault(d, set()).add(to_hex(bar.get_facecolor()))
    assert all(len(c) == 1 for c in by_row.values())
    assert len({next(iter(c)) for c in by_row.values()}) == len(by_row)   # one distinct colour per device
    assert [ln.get_xdata()[0] for ln in ax.lines] == [pytest.approx(schedule.makespan)]


def test_gantt_of_an_evaluated_split_and_of_an_infeasible_result():
    g = sc.Graph.chain([1.0, 2.0], comm=0.5)
    s = evaluate_schedule(g, Devices.pcie_star(2, cpu=False), {0: "accelerator:0", 1: "accelerator:1"})
    ax = plot.plot_schedule(s)
    assert [(b.get_x(), b.get_width()) for b in ax.containers[0]] == [(0.0, 1.0), (2.0, 2.0)]
    assert [(b.get_x(), b.get_width()) for b in ax.containers[1]] == [(1.0, 1.0)]
    empty = plot.plot_schedule(type(s).infeasible("heft", "no device fits"))
    assert "no schedule" in empty.get_title() and len(empty.containers[0]) == 0


def test_plot_schedule_rejects_a_plan(plan):
    with pytest.raises(InvalidArgumentError, match="^schedule:"):
        plot.plot_schedule(plan)


@dataclasses.dataclass
class Rec:
    """A pipeline timeline record, as a throughput schedule gives them."""

    device: int
    microbatch: int
    phase: str
    start: float
    end: float


def _gpipe(stages=2, microbatches=3):
    recs = []
    for m in range(microbatches):
        for s in range(stages):
            recs.append(Rec(s, m, "forward", float(m + s), float(m + s + 1)))
    t0 = microbatches + stages - 1
    for m in range(microbatches):
        for s in reversed(range(stages)):
            start = t0 + 2 * (m + stages - 1 - s)
            recs.append(Rec(s, m, "backward", float(start), float(start + 2)))
    return recs


def test_timeline_bars_are_the_records():
    recs = _gpipe()
    ax = plot.plot_timeline(recs)
    bars = ax.containers[0]
    assert len(bars) == len(recs)
    for bar, r in zip(bars, recs):
        assert (bar.get_x(), bar.get_width()) == pytest.approx((r.start, r.end - r.start))
        assert bar.get_y() + bar.get_height() / 2 == pytest.approx(r.device)
    by_phase = {}
    for bar, r in zip(bars, recs):
        by_phase.setdefault(r.phase, set()).add(to_hex(bar.get_facecolor()))
    assert all(len(c) == 1 for c in by_phase.values())
    assert by_phase["forward"] != by_phase["backward"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["device 0", "device 1"]
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{r.phase[0].upper()}{r.microbatch}" for r in recs)


def test_timeline_of_a_pipeline_timeline():
    from stagecut.throughput.schedules import one_f_one_b

    tl = one_f_one_b([1.0, 1.5, 1.0], [2.0, 3.0, 2.0], 4, devices=["gpu:b", "gpu:a", "gpu:c"])
    ax = plot.plot_timeline(tl)
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == list(tl.devices)
    bars = ax.containers[0]
    assert len(bars) == len(tl.slots)
    for bar, slot in zip(bars, tl.slots):
        assert (bar.get_x(), bar.get_width()) == pytest.approx((slot.start, slot.end - slot.start))
        assert rows[round(bar.get_y() + bar.get_height() / 2)] == slot.device
    assert sorted(t.get_text() for t in ax.texts) == sorted(slot.label for slot in tl.slots)
    assert len(plot.plot_timeline(tl.slots).containers[0]) == len(tl.slots)


def test_timeline_of_mappings_and_of_schedule_gantt_rows(schedule):
    rows = schedule.gantt()
    ax = plot.plot_timeline(rows)
    bars = ax.containers[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    for bar, r in zip(bars, rows):
        assert (bar.get_x(), bar.get_width()) == pytest.approx((r["start"], r["finish"] - r["start"]))
        assert names[round(bar.get_y() + bar.get_height() / 2)] == r["device"]
    colors = {names[round(b.get_y() + b.get_height() / 2)]: to_hex(b.get_facecolor()) for b in bars}
    assert len(set(colors.values())) == len(colors)   # no phase: one colour per device
    labelled = plot.plot_timeline([{"stage": "a", "start": 0, "finish": 3, "label": "x"}])
    assert [t.get_text() for t in labelled.texts] == ["x"]


@pytest.mark.parametrize("records, field", [
    ([], "records"), (3, "records"), ("abc", "records"),
    ([{"start": 0, "end": 1}], r"records\[0\]\.device"),
    ([{"device": 0, "end": 1}], r"records\[0\]\.start"),
    ([{"device": 0, "start": 0}], r"records\[0\]\.end"),
    ([{"device": 0, "start": 0, "end": 1}, {"device": 0, "start": 2, "end": 1}], r"records\[1\]\.end"),
    ([{"device": 0, "start": float("nan"), "end": 1}], r"records\[0\]\.start"),
    ([{"device": 0, "start": "0", "end": 1}], r"records\[0\]\.start"),
])
def test_plot_timeline_rejects_bad_records(records, field):
    with pytest.raises(InvalidArgumentError, match=f"^{field}"):
        plot.plot_timeline(records)


# ------------------------------------------------------------------------------ writing
def test_savefig_writes_atomically_and_keeps_permissions(tmp_path, plan, monkeypatch):
    path = tmp_path / "plan.png"
    path.write_bytes(b"old")
    os.chmod(path, 0o640)
    ax = plot.plot_stages(plan)
    plot.savefig(ax, path)
    assert path.read_bytes().startswith(PNG)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ax.figure, "savefig", broken)
    with pytest.raises(OSError, match="No space"):
        plot.savefig(ax.figure, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["plan.png"]   # no temporary file left behind


def test_savefig_rejects_an_unknown_extension_and_a_non_figure(tmp_path, plan):
    ax = plot.plot_stages(plan)
    with pytest.raises(InvalidArgumentError, match="^path:"):
        plot.savefig(ax, tmp_path / "plan.docx")
    with pytest.raises(InvalidArgumentError, match="^fig_or_ax:"):
        plot.savefig(object(), tmp_path / "plan.png")


def test_without_matplotlib_the_error_names_the_extra(monkeypatch, plan):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert not plot.matplotlib_available()
    for call in (lambda: plot.plot_stages(plan), lambda: plot.plot_timeline([{"device": 0, "start": 0, "end": 1}])):
        with pytest.raises(BackendUnavailableError, match=re.escape('pip install "stagecut[plot]"')):
            call()


# ---------------------------------------------------------------------------------- CLI
@pytest.fixture
def run(capsys):
    def call(*argv):
        capsys.readouterr()
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


@pytest.fixture
def drawn(monkeypatch):
    """The axes every savefig call wrote (the real write still happens)."""
    seen = []
    real = plot.savefig

    def spy(ax, path, **kw):
        seen.append(_stacks(ax) if ax.containers and ax.containers[0].get_label() != "nodes" else ax)
        real(ax, path, **kw)

    monkeypatch.setattr(plot, "savefig", spy)
    return seen


def test_cli_partition_and_slice_plot_the_stages_they_print(tmp_path, run, drawn):
    for cmd in (["partition", "example:transformer", "-k", "3", "-l", "0"],
                ["slice", "example:transformer", "-k", "3", "--method", "order"]):
        png = tmp_path / f"{cmd[0]}.png"
        code, out, err = run(*cmd, "--plot", png, "--json")
        assert code == 0, err
        assert png.read_bytes().startswith(PNG)
        result = json.loads(out)
        stacks = drawn.pop()
        for j, s in enumerate(result["stages"]):
            assert sum(v[j][2] for v in stacks.values()) == pytest.approx(s["load"])


def test_cli_latency_plots_the_schedule_and_an_evaluated_split(tmp_path, run, drawn):
    png = tmp_path / "lat.png"
    code, out, err = run("latency", "example:transformer", "-k", "2", "--method", "heft", "--plot", png, "--json")
    assert code == 0, err
    assert png.read_bytes().startswith(PNG)
    result = json.loads(out)
    ax = drawn.pop()
    starts = sorted(b.get_x() for b in ax.containers[0])
    assert starts == pytest.approx(sorted(result["start"].values()))
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"blocks": [[0, 1], list(range(2, 110))]}))
    code, _, err = run("latency", "example:transformer", "-k", "2", "--evaluate", split, "--plot", png)
    assert code == 0, err
    assert len(drawn.pop().containers[0]) == 110


def test_cli_plot_paths_are_checked_before_solving(tmp_path, run, drawn):
    out = tmp_path / "r.json"
    cases = [(tmp_path / "missing" / "p.png", "does not exist"), (tmp_path / "p.txt", "must end in .png"),
             (tmp_path, "must end in"), (out.with_suffix(".png"), None)]
    for path, message in cases[:3]:
        code, stdout, err = run("partition", "example:transformer", "-k", "2", "--plot", path)
        assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1
        assert "--plot" in err and message in err
    code, _, err = run("partition", "example:transformer", "-k", "2", "-o", tmp_path / "same.png", "--plot",
                       tmp_path / "same.png")
    assert code == 2 and "--plot" in err and "also the -o file" in err
    assert drawn == []


def test_cli_without_matplotlib_is_one_line_and_exit_2(tmp_path, run, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = run("latency", "example:transformer", "-k", "2", "--plot", tmp_path / "p.png")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and 'pip install "stagecut[plot]"' in err
    assert not (tmp_path / "p.png").exists()
