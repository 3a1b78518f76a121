"""Tests that can fail: every test function checks something, and not only inside loops that may
run zero times.

A static check over the test files (their syntax trees; nothing is run). A test "checks" through
an ``assert``, ``pytest.raises``/``warns``/``fail``, or a call of a function whose name starts
with ``assert``/``check``/``expect``/``verify`` or of a helper (defined in that test file or
imported from another one) that checks. A check counts only where it always runs: outside loops,
or inside a ``for`` loop over a collection that is visibly non-empty (a non-empty literal,
``range`` of constants, a local or module-level name bound to such a literal, or ``range(a, a + k)``).
A test whose every check sits in a loop over a computed collection passes when that collection
is empty: add a check outside the loop (``assert items``, a count) or loop over a literal.

Tests listed in ``REVIEWED`` were flagged when this check was written and read by hand: each
loops over a collection that cannot be empty for the reason given. The list may only shrink.
"""

from __future__ import annotations

import ast
import functools
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
CHECK_PREFIXES = ("assert", "check", "expect", "verify")
CHECK_CALLS = {"raises", "warns", "fail", "deprecated_call"}

# "path:function": why its loop cannot be empty
REVIEWED = {
    "frontends/test_pipeline_runtime.py:test_every_cut_of_the_encoder_runs":
        "cuts(t): one cut after each of the traced encoder's operators but the last (dozens)",
    "latency/test_fusion.py:test_rules_hold_at_the_fixpoint_on_random_graphs":
        "60 random graphs: 717 fused edges checked, in 31 of them (counted when this list was made)",
    "test_generators.py:test_regal_graph_is_well_formed_at_every_small_size":
        "REGAL_MODELS: stagecut.examples' tuple of four models",
}


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _is_check_call(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Call):
        name = _name(node).lstrip("_").lower()
        return _name(node) in CHECK_CALLS or name.startswith(CHECK_PREFIXES)
    return False


class _Module:
    """One test file: its top-level literal constants and the helpers that check."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(), str(path))
        self.consts: set[str] = set()
        self.helpers: set[str] = set()
        self.imports: dict[str, tuple[str, str]] = {}  # local name -> (module stem, name)
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
                if _nonempty(node.value, set()):
                    self.consts.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("test_"):
                if any(_is_check_call(n) for n in ast.walk(node)):
                    self.helpers.add(node.name)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module.rsplit(".", 1)[-1], alias.name)


def _nonempty(e: ast.AST, names: set[str]) -> bool:
    """Whether the expression is visibly a non-empty collection."""
    if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
        return any(not isinstance(x, ast.Starred) for x in e.elts)
    if isinstance(e, ast.Dict):
        return bool(e.keys)
    if isinstance(e, ast.Constant) and isinstance(e.value, (str, bytes)):
        return bool(e.value)
    if isinstance(e, ast.Name):
        return e.id in names
    if isinstance(e, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return all(not g.ifs and _nonempty(g.iter, names) for g in e.generators)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return _nonempty(e.left, names) or _nonempty(e.right, names)
    if isinstance(e, ast.Call):
        name, args = _name(e), e.args
        if name == "range":
            try:
                return len(range(*[ast.literal_eval(a) for a in args])) > 0
            except (ValueError, TypeError, SyntaxError):
                # range(a, a + k) with a constant k > 0
                if len(args) == 2 and isinstance(args[1], ast.BinOp) and isinstance(args[1].op, ast.Add):
                    k = args[1].right
                    return (ast.dump(args[1].left) == ast.dump(args[0]) and isinstance(k, ast.Constant)
                            and isinstance(k.value, int) and k.value > 0)
                return False
        if name in ("enumerate", "sorted", "reversed", "list", "tuple", "set", "iter") and args:
            return _nonempty(args[0], names)
        if name in ("zip", "product") and args:
            return all(_nonempty(a, names) for a in args)
        if name in ("items", "keys", "values") and isinstance(e.func, ast.Attribute):
            return _nonempty(e.func.value, names)
    return False


def _modules(root: pathlib.Path) -> dict[pathlib.Path, _Module]:
    return {p: _Module(p) for p in sorted(root.rglob("*.py")) if "data" not in p.relative_to(root).parts}


@functools.lru_cache(maxsize=2)
def flagged_tests(root: pathlib.Path = TESTS) -> tuple[str, ...]:
    """The test functions under ``root`` that check nothing that always runs ("path:function")."""
    mods = _modules(root)
    by_stem: dict[str, list[_Module]] = {}
    for m in mods.values():
        by_stem.setdefault(m.path.stem, []).append(m)
    out = []
    for m in mods.values():
        consts, helpers = set(m.consts), set(m.helpers)
        for local, (stem, name) in m.imports.items():
            for other in by_stem.get(stem, []):
                if name in other.consts:
                    consts.add(local)
                if name in other.helpers:
                    helpers.add(local)

        def checks(node: ast.AST, helpers: set[str] = helpers) -> bool:
            return _is_check_call(node) or (isinstance(node, ast.Call) and _name(node) in helpers)

        def always(node: ast.AST, names: set[str]) -> bool:
            """Whether a check below ``node`` runs whenever ``node`` runs."""
            for ch in ast.iter_child_nodes(node):
                if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.While)):
                    continue
                if isinstance(ch, ast.Assign) and _nonempty(ch.value, names):
                    names.update(t.id for t in ch.targets if isinstance(t, ast.Name))
                if isinstance(ch, (ast.For, ast.AsyncFor)):
                    if checks(ch.iter) or always(ch.iter, names):
                        return True
                    if _nonempty(ch.iter, names) and any(checks(b) or always(b, names) for b in ch.body):
                        return True
                    continue
                if checks(ch) or always(ch, names):
                    return True
            return False

        for f in ast.walk(m.tree):
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test_"):
                if not always(f, set(consts)):
                    out.append(f"{m.path.relative_to(root).as_posix()}:{f.name}")
    return tuple(out)


def test_every_test_checks_something_that_always_runs() -> None:
    new = [t for t in flagged_tests() if t not in REVIEWED]
    assert not new, ("these tests check only inside loops over collections that may be empty, or "
                     "check nothing: add a check outside the loop (see this file's docstring):\n  "
                     + "\n  ".join(new))


def test_the_reviewed_list_only_names_tests_still_flagged() -> None:
    stale = sorted(set(REVIEWED) - set(flagged_tests()))
    assert not stale, f"fixed or gone: remove them from REVIEWED: {stale}"


def test_the_check_catches_what_it_is_for() -> None:
    src = '''
import pytest
ITEMS = (1, 2)
def check_it(x):
    assert x
def test_nothing():
    x = 1
def test_loop_over_computed(things=None):
    for t in compute():
        assert t
def test_all_of_computed():
    assert all(t for t in compute())
def test_loop_over_literal():
    for t in (1, 2):
        assert t
def test_loop_over_constant():
    for t in ITEMS:
        check_it(t)
def test_loop_over_local_literal():
    runs = [1, 2]
    for t in runs:
        assert t
def test_loop_and_count():
    seen = compute()
    for t in seen:
        assert t
    assert len(seen) == 3
def test_raises():
    with pytest.raises(ValueError):
        int("x")
def test_loop_over_offset_range(chunk=1):
    for s in range(chunk * 10, chunk * 10 + 10):
        assert s >= 0
def test_loop_over_empty_range():
    for s in range(0):
        assert s
def test_while_only():
    while compute():
        assert True
'''
    # a module's own flags only: run the check over a scratch directory holding it
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (pathlib.Path(d) / "test_x.py").write_text(src)
        got = {t.split(":", 1)[1] for t in flagged_tests(pathlib.Path(d))}
    # note: `assert all(...)` over a computed collection is not caught (it is an assert outside a loop)
    assert got == {"test_nothing", "test_loop_over_computed", "test_loop_over_empty_range", "test_while_only"}
