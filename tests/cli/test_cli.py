import json

import stagecut as sc
from stagecut.cli.main import main


def test_partition_json_and_split_roundtrip(tmp_path, capsys):
    g = sc.transformer_like(layers=2, training=True, seed=3)
    wl = tmp_path / "w.json"
    sc.write_workload(g, wl)
    out = tmp_path / "split.json"
    assert main(["partition", str(wl), "--json", "-o", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    plan = sc.partition(g)
    assert res["objective"] == plan.objective and res["status"] == "optimal" and res["method"] == "dp"
    assert res["ideals"] == plan.ideals and isinstance(res["runtime_s"], float)
    assert {d["kind"] for d in res["devices"]} <= {"accelerator", "cpu"}
    assert sorted(i for d in res["devices"] for i in d["nodes"]) == sorted(g.ids)
    # the written split scores the same through `evaluate`
    assert main(["evaluate", str(wl), str(out), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["objective"] == plan.objective and ev["feasible"] and ev["contiguous"]


def test_partition_table_and_infeasible(tmp_path, capsys):
    g = sc.Graph.chain([1.0, 2.0], memory=[5.0, 5.0], defaults={"accelerators": 1, "cpus": 0, "memory": 4.0})
    wl = tmp_path / "w.json"
    sc.write_workload(g, wl)
    assert main(["partition", str(wl), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["status"] == "infeasible" and res["objective"] is None
    assert main(["partition", str(wl), "--memory", "10"]) == 0
    text = capsys.readouterr().out
    assert "time per sample: 3.0000 (optimal" in text


def test_auto_says_which_method_ran(tmp_path, capsys):
    g = sc.Graph([sc.Node(id=i, compute={"accelerator": 1.0}) for i in range(11)], [],
                 {"accelerators": 2, "cpus": 0})
    wl = tmp_path / "w.json"
    sc.write_workload(g, wl)
    assert main(["partition", str(wl), "--max-ideals", "100", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["method"] == "dpl" and res["status"] == "feasible" and res["notes"]
    assert main(["partition", str(wl), "--max-ideals", "100", "--method", "dp"]) == 2
    assert "max_ideals" in capsys.readouterr().err
