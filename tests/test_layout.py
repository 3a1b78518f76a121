"""The shape of the code: no import cycle, no oversized file, documented errors on the public API."""

import inspect
import pathlib
import subprocess
import sys

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


def test_every_module_imports_alone():
    """Each module imported first, in a fresh interpreter state: an import cycle shows up as an
    ImportError for some entry point even when `import stagecut` happens to work."""
    mods = list(_modules())
    assert "stagecut.throughput.dp" in mods and "stagecut.cli.main" in mods
    code = (
        "import importlib, sys\n"
        "bad = []\n"
        f"for name in {mods!r}:\n"
        "    for m in [m for m in sys.modules if m == 'stagecut' or m.startswith('stagecut.')]:\n"
        "        if not m.endswith('_core'):\n"
        "            del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as e:\n"
        "        bad.append(f'{name}: {type(e).__name__}: {e}')\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


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
