#!/usr/bin/env bash
# Line and branch coverage of the modules benches/COVERAGE.md reports, each measured with the
# tests that are meant to cover it (not the whole suite).
#
#   benches/coverage.sh            # both parts
#   benches/coverage.sh python     # coverage.py: sweep, balance, the plan exports
#   benches/coverage.sh rust       # the Rust latency evaluator: the crate's unit tests and
#                                  # rust/tests/latency_reference.rs
#
# Needs: pip install coverage (Python); the rustup component llvm-tools (Rust: its llvm-profdata
# and llvm-cov, which must match rustc's LLVM). Reports go to OUT (default target/coverage):
# python.txt and rust.txt, with the missing lines. Runs niced (nice -n 15); the default suite's
# `-m "not slow"` selection.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/target/coverage}
WHAT=${1:-all}
mkdir -p "$OUT"
cd "$ROOT"

if [ "$WHAT" = all ] || [ "$WHAT" = python ]; then
    # module pattern | the tests that exercise it
    parts=(
        "python/stagecut/sweep/*|tests/sweep tests/sweep/test_*_bite.py"
        "python/stagecut/balance.py|tests/test_balance.py tests/test_balance_bite.py"
        "python/stagecut/frontends/export.py,python/stagecut/frontends/split.py|tests/frontends/test_export.py tests/frontends/test_export_logic.py tests/frontends/test_split.py tests/test_export_bite.py"
    )
    : > "$OUT/python.txt"
    for part in "${parts[@]}"; do
        include=${part%%|*}
        tests=()
        for t in ${part#*|}; do if [ -e "$t" ]; then tests+=("$t"); fi; done
        data=$OUT/.coverage.$(echo "$include" | tr -c 'a-z' _)
        COVERAGE_FILE=$data nice -n 15 python -m coverage run --branch --include="$include" \
            -m pytest -q -p no:cacheprovider -o addopts= -m "not slow" "${tests[@]}" > "$OUT/pytest.log" 2>&1 \
            || { echo "coverage.sh: tests failed (see $OUT/pytest.log)" >&2; exit 1; }
        { echo "# $include (tests: ${tests[*]})"; COVERAGE_FILE=$data python -m coverage report -m; echo; } \
            | tee -a "$OUT/python.txt"
    done
fi

if [ "$WHAT" = all ] || [ "$WHAT" = rust ]; then
    sysroot=$(rustc --print sysroot)
    bin=$sysroot/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin
    [ -x "$bin/llvm-cov" ] || { echo "coverage.sh: rustup component add llvm-tools" >&2; exit 2; }
    prof=$OUT/rust-profraw
    rm -rf "$prof"
    mkdir -p "$prof"
    # a separate target directory: the instrumented build must not replace the normal one
    export RUSTFLAGS="-C instrument-coverage" CARGO_TARGET_DIR=$OUT/target
    LLVM_PROFILE_FILE="$prof/%p-%m.profraw" nice -n 15 cargo test --quiet --lib --test latency_reference \
        > "$OUT/cargo.log" 2>&1 || { echo "coverage.sh: cargo test failed (see $OUT/cargo.log)" >&2; exit 1; }
    "$bin/llvm-profdata" merge -sparse "$prof"/*.profraw -o "$OUT/rust.profdata"
    # the two test executables (the library's unit tests, the reference test)
    mapfile -t exes < <(cargo test --lib --test latency_reference --no-run --message-format=json 2>/dev/null \
        | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])')
    objects=("${exes[0]}")
    for e in "${exes[@]:1}"; do objects+=(--object "$e"); done
    "$bin/llvm-cov" report --instr-profile="$OUT/rust.profdata" "${objects[@]}" "$ROOT"/rust/latency/*.rs \
        | tee "$OUT/rust.txt"
    "$bin/llvm-cov" show --instr-profile="$OUT/rust.profdata" "${objects[@]}" --show-line-counts \
        --format=text "$ROOT"/rust/latency/*.rs > "$OUT/rust-lines.txt"
    # the lines never run (count 0), file by file
    awk '/^\/.*\.rs:$/ { f = $0 } /^ *[0-9]+\| *0\|/ { split($0, a, "|"); print f " " a[1] + 0 }' \
        "$OUT/rust-lines.txt" > "$OUT/rust-missing.txt"
    echo "lines never run: $OUT/rust-missing.txt"
fi
