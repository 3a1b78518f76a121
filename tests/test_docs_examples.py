"""Every ```python block of the documentation pages and the README runs, and its asserts hold.

A block in doctest form (``>>>``) is run by doctest, its outputs checked. A page's blocks run in
order in one namespace (a later block may use an earlier one's names), in a temporary directory
laid out like a checkout: ``TMP/project`` is the working directory and ``TMP/shared`` links to
the real ``../shared``, so the pages' ``../shared/workloads/...`` paths resolve and nothing is
written into the checkout. A block preceded by the line ``% not run: REASON`` (a MyST comment;
``<!-- not run: REASON -->`` in the README) is skipped; a page whose examples take long says
``% docs-test: slow`` (``<!-- docs-test: slow -->``) and runs under ``-m slow`` (``.ci/docs``
runs those).
"""

from __future__ import annotations

import contextlib
import doctest
import io
import pathlib
import re

import pytest

from helpers import SHARED, require_shared

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts) + [ROOT / "README.md"]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SKIP = re.compile(r"^(% not run:|<!-- not run:)")


def blocks(page: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """``(line, code, skip reason or None)`` for each ```python block of ``page``."""
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").splitlines()
        prev = before[-1].strip() if before else ""
        reason = prev if SKIP.match(prev) else None
        out.append((text.count("\n", 0, m.start()) + 1, m.group(1), reason))
    return out


def _params():
    for page in PAGES:
        if not blocks(page):
            continue
        marks = [pytest.mark.slow] if "docs-test: slow" in page.read_text() else []
        yield pytest.param(page, id=str(page.relative_to(ROOT)), marks=marks)


def test_the_pages_have_examples():
    """The parser finds the blocks (a changed fence style would silently run nothing)."""
    found = {p.relative_to(ROOT).as_posix(): len(blocks(p)) for p in PAGES}
    assert found["docs/getting-started.md"] >= 2 and found["README.md"] >= 1
    assert sum(found.values()) >= 15
    # a skipped block says why
    assert all(reason.split(":", 1)[1].strip(" ->") for p in PAGES for _, _, reason in blocks(p) if reason)


def test_api_reference_lists_every_public_name():
    """A name added to ``stagecut.__all__`` must get its entry in the API reference."""
    import stagecut

    listed = set(re.findall(r"[\w.]+", "\n".join(re.findall(r"^:names: (.*)$", (DOCS / "api" / "index.md").read_text(),
                                                               re.M))))
    assert listed and sorted(set(stagecut.__all__) - listed) == []
    assert sorted(listed - set(stagecut.__all__)) == []


@pytest.mark.parametrize("page", list(_params()))
def test_page_examples_run(page: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = page.read_text()
    if "../shared" in text:
        require_shared()
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "shared").symlink_to(SHARED.parent, target_is_directory=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    ran = 0
    for line, code, reason in blocks(page):
        if reason:
            continue
        name = f"{page.relative_to(ROOT)}:{line}"
        if code.lstrip().startswith(">>>"):
            # a doctest block: its printed outputs are checked too
            test = doctest.DocTestParser().get_doctest(code, namespace, name, str(page), line)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
            out = io.StringIO()
            runner.run(test, out=out.write, clear_globs=False)
            assert runner.failures == 0, out.getvalue()
        else:
            compiled = compile(code, name, "exec")
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compiled, namespace)  # noqa: S102 - the documentation's own examples
        ran += 1
    if ran == 0:
        pytest.skip(f"{page.name}: every block is marked not run")
