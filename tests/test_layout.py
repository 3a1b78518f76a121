"""The shape of the code: no import cycle, no oversized file, documented errors on the public API."""

import ast
import inspect
import pathlib
import subprocess
import sys

import networkx as nx
import pytest

import stagecut as sc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "stagecut"
MAX_LINES = 600


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if rel.name != "__main__":
            yield ".".join(parts)


# slow (a fresh import of each of ~140 modules): the default run still has the static check
# test_no_import_cycle_between_modules (no cycle at all, function-local imports included) and
# --doctest-modules, which imports every module
@pytest.mark.slow
def test_every_module_imports_alone():
    """Each module imported first, in a fresh interpreter state: an import cycle shows up as an
    ImportError for some entry point even when `import stagecut` happens to work."""
    mods = list(_modules())
    assert "stagecut.throughput.dp" in mods and "stagecut.cli.main" in mods
    # Importing any module first runs stagecut/__init__ to the end before the module itself, so
    # every module that `import stagecut` already loads is imported exactly as `import stagecut`
    # is: one fresh import of the package, then one per module it does not load.
    code = (
        "import importlib, sys\n"
        "def fresh():\n"
        "    for m in [m for m in sys.modules if m == 'stagecut' or m.startswith('stagecut.')]:\n"
        "        if not m.endswith('_core'):\n"
        "            del sys.modules[m]\n"
        "bad = []\n"
        "loaded = set()\n"
        f"for name in ['stagecut', *{mods!r}]:\n"
        "    if name in loaded:\n"
        "        continue\n"
        "    fresh()\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as e:\n"
        "        bad.append(f'{name}: {type(e).__name__}: {e}')\n"
        "    if name == 'stagecut':\n"
        "        loaded = set(sys.modules)\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def _module_names(package: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted name -> file of every module under ``package`` (a package is its ``__init__``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def import_graph(package: pathlib.Path, extensions: tuple[str, ...] = ()) -> nx.DiGraph:
    """The module import graph of ``package`` from its source: an edge ``a -> b`` for every
    import in ``a`` (at any depth: imports inside functions and ``if TYPE_CHECKING`` blocks count,
    since a function-local import only hides a cycle) that names ``b``. Relative imports are
    resolved; ``from p import x`` is an edge to the module ``p.x`` when there is one, else to
    ``p``. An import of ``p.q.r`` is an edge to ``p.q.r`` alone (the packages' ``__init__`` files
    also run, which is why :func:`test_latency_subpackage_inits_import_nothing` keeps them empty).
    ``extensions`` are compiled modules (no source, no imports)."""
    names = _module_names(package)
    known = set(names) | set(extensions)
    root = package.name

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    g = nx.DiGraph()
    g.add_nodes_from(known)
    for mod, path in names.items():
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [owner(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else owner(source)
                           for a in node.names]
            for t in targets:
                if t is not None and t != mod and (t == root or t.startswith(root + ".")):
                    g.add_edge(mod, t)
    return g


#: import cycles tolerated, each with its reason (none: keep it that way)
ALLOWED_CYCLES: dict[frozenset[str], str] = {}


def test_no_import_cycle_between_modules():
    """No two modules of the package import each other, directly or through others, even
    through imports placed inside functions: the shared piece belongs in a module both import."""
    g = import_graph(PACKAGE, extensions=("stagecut._core",))
    assert g.number_of_edges() > 300
    assert g.has_edge("stagecut.latency.solve", "stagecut.latency.quickp.ip")  # a function-local import
    cycles = [frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    bad = [sorted(c) for c in cycles if c not in ALLOWED_CYCLES]
    shown = []
    for comp in bad:
        cycle = nx.find_cycle(g.subgraph(comp))
        shown.append(" -> ".join([u for u, _ in cycle] + [cycle[0][0]]))
    assert not bad, "import cycles:\n" + "\n".join(shown)


def test_the_cycle_check_sees_hidden_and_relative_imports(tmp_path):
    """The graph builder finds a cycle that a function-local, relative import hides."""
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from demo.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..sub.a import x\n    from . import c\n")
    (pkg / "sub" / "c.py").write_text("import demo.sub.a as a\nimport os\n")
    g = import_graph(pkg)
    assert set(g.edges) == {("demo.sub.a", "demo.sub.b"), ("demo.sub.b", "demo.sub.a"),
                            ("demo.sub.b", "demo.sub.c"), ("demo.sub.c", "demo.sub.a")}
    assert {frozenset(c) for c in nx.strongly_connected_components(g) if len(c) > 1} == \
        {frozenset({"demo.sub.a", "demo.sub.b", "demo.sub.c"})}


LATENCY = PACKAGE / "latency"
#: the most .py files directly in latency/ (the entry point and the public names; the rest lives
#: in sub-packages named for what they hold)
MAX_LATENCY_TOP_LEVEL = 8


def test_latency_is_grouped_in_subpackages():
    top = sorted(p.name for p in LATENCY.glob("*.py"))
    assert "__init__.py" in top and "solve.py" in top
    assert len(top) <= MAX_LATENCY_TOP_LEVEL, f"latency/ has {len(top)} top-level modules: {top}"
    subs = sorted(p.parent.name for p in LATENCY.glob("*/__init__.py"))
    assert {"model", "heuristics", "exact", "diviml", "quickp", "pcie"} <= set(subs)


def test_latency_subpackage_inits_import_nothing():
    """Each latency sub-package's ``__init__`` is a docstring naming what it implements, with no
    import: importing one of its modules then runs nothing else (no hidden cycle through an
    ``__init__``), and the public names stay in :mod:`stagecut.latency` alone."""
    inits = sorted(LATENCY.glob("*/__init__.py"))
    assert len(inits) >= 5, "the latency sub-packages are missing"
    for init in inits:
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree)
        assert doc and len(doc) > 200, f"{init.relative_to(ROOT)}: no docstring saying what it holds"
        assert len(tree.body) == 1, f"{init.relative_to(ROOT)}: only a docstring, no code or imports"


def test_no_source_file_over_the_size_limit():
    files = list(PACKAGE.rglob("*.py")) + list((ROOT / "rust").rglob("*.rs"))
    assert len(files) > 20
    big = {str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert not big, f"files over {MAX_LINES} lines: {big}"


def test_public_functions_document_their_errors():
    missing = []
    for name in sc.__all__:
        obj = getattr(sc, name)
        if inspect.isfunction(obj) and obj.__module__.startswith("stagecut"):
            doc = inspect.getdoc(obj) or ""
            if "Raises" not in doc:
                missing.append(name)
    assert not missing, f"public functions without a Raises section: {missing}"


def test_no_issue_numbers_in_user_facing_text():
    """Docstrings, CLI text, the README and the documentation never cite the project's issue
    tracker ("issue 12") or a working session: they mean nothing to a reader and go stale."""
    import re

    pattern = re.compile(r"\bissues? #?\d+|\bthis session\b", re.I)
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi"), ROOT / "README.md", ROOT / "CHANGELOG.md",
             ROOT / "CONTRIBUTING.md", *(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
    assert len(files) > 40
    hits = []
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_readme_is_a_front_door():
    """The README stays short, gives CI's own test command, and its links lead somewhere."""
    import re

    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    assert "```sh\n.ci/run\n```" in text  # the test command is exactly what CI runs
    assert (ROOT / ".ci" / "run").is_file()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def test_latency_public_names_survive_the_layout():
    """The sub-package named ``quickp`` does not shadow the function: ``stagecut.latency.quickp``
    is QuickP's entry point, and every public name is what it was. (So ``import
    stagecut.latency.quickp.ip as m`` fails; ``from stagecut.latency.quickp import ip`` works.)"""
    import stagecut.latency as lat
    from stagecut.latency.quickp import ip as quickp_ip

    assert lat.quickp is quickp_ip.quickp and callable(lat.quickp)
    expected = {"Device", "Devices", "LatencyProblem", "Schedule", "Transfer", "asap", "evaluate_schedule",
                "rank_round_robin", "schedule_from", "place", "METHODS", "fuse", "Fusion", "colocation_groups",
                "Colocation", "with_colocation", "read_operator_graph", "operator_devices",
                "synthetic_operator_graph", "quickp", "best_device", "met", "greedy", "heft", "simulated_annealing",
                "evolutionary", "local_search", "metis", "mcmc", "solve_milp", "solve_brute", "pcie_greedy",
                "solve_pcie_ip", "evaluate_pieces"}
    assert expected <= set(lat.__all__)
    assert all(not inspect.ismodule(getattr(lat, name)) for name in lat.__all__)
    for name in ("Device", "Devices", "LatencyProblem", "Schedule", "evaluate_schedule", "place"):
        assert getattr(sc, name) is getattr(lat, name)
