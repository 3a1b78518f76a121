"""Re-run test files against named mutmut mutants without mutmut's time limits or forking.

    python benches/mutation_recheck.py SCRATCH "TEST_FILE..." MUTANT_NAME...

SCRATCH is a scratch copy kept by ``benches/mutation.sh --keep`` (its ``mutants/`` tree holds
the trampolined sources). Each mutant is activated by ``MUTANT_UNDER_TEST`` in one pytest run
(``-x``) in this process; the line printed per mutant is ``killed`` or ``SURVIVED``. The tests
run first without a mutant and must pass (set ``RECHECK_NO_BASELINE=1`` to skip that run).

Use it for mutmut's ``timeout`` and ``suspicious`` verdicts on a loaded machine (its wall-clock
limit is half its CPU limit, and a worker forked after torch was imported can deadlock), and to
check a new test against the mutant it was written for: copy the test file into
``SCRATCH/mutants/tests/`` first. A mutant that loops hangs this run: wrap it in ``timeout``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

import pytest


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    scratch, tests, names = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
    os.chdir(os.path.join(scratch, "mutants"))
    sys.path.insert(0, os.path.abspath("src"))
    for name in ([] if os.environ.get("RECHECK_NO_BASELINE") and names else [""]) + names:
        os.environ["MUTANT_UNDER_TEST"] = name
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests])
        print(name or "(no mutant)", {0: "SURVIVED", 1: "killed"}.get(int(rc), f"pytest exit {int(rc)}"), flush=True)
        if not name and rc != 0:
            print(buf.getvalue()[-3000:])
            sys.exit("the tests fail without a mutant")


if __name__ == "__main__":  # spawned worker processes (Dask, multiprocessing) re-import this module
    main()
