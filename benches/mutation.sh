#!/usr/bin/env bash
# Mutation testing of the solvers and evaluators: cargo-mutants over the Rust core, mutmut over the
# Python evaluators. Run it before a solver change lands (it is too slow for per-commit CI).
#
#   benches/mutation.sh                      # the in-scope files changed against BASE (default HEAD:
#                                            # uncommitted changes; --base main~3, or MUTATION_BASE)
#   benches/mutation.sh FILE...              # these files (Rust or Python, in scope or not)
#   benches/mutation.sh --all                # every in-scope file (hours on 2 cores)
#   benches/mutation.sh --sample 8 --seed 1 --all   # 8 mutants per file, drawn with seed 1
#
# Options: --base REF, --rust-only, --python-only, --jobs N (default 1), --timeout SECONDS (per
# test run, default 300), --out DIR (default target/mutation), --keep (keep the scratch copy),
# --sample N (N mutants of each file, drawn at random with --seed S, default 0; the same N, S and
# code give the same mutants; MUTATION_SAMPLE / MUTATION_SEED set them too). A full run of the
# scope takes hours on this machine; a sample gives a score with its count in the summary.
# --py-tests "PATH..." replaces the Python test selection (default: each file's tests, below);
# --rust-tests "ARGS" are cargo test's arguments (default: all the crate's tests), e.g.
# "--lib --test latency_reference". --py-timeout-factor F: mutmut's timeout_multiplier (default 15:
# a mutant that loops is stopped after (its tests' time + 1 s) * F * 2 CPU seconds; 3 is enough
# for tests that do not depend on timing and saves minutes per looping mutant).
# Needs: cargo install cargo-mutants --locked; pip install mutmut (3.x); the extension built
# (maturin develop): its .so is copied, not rebuilt. MUTATION_NICE: the niceness of the runs (default 15).
#
# Everything runs niced in a scratch copy (the tracked and untracked files of the working tree,
# nothing ignored), so the working tree is never touched. Rust builds use opt-level 0 without
# debug info (the brute-force tests are small; a build per mutant is the cost). Results:
# OUT/rust/mutants.out/{caught,missed,timeout,unviable}.txt, OUT/python/survivors.txt, and a
# summary (score = killed / viable: caught + missed + timeout; a timeout counts as killed).
# Under load, mutmut's timeout and suspicious verdicts are not kills: its wall-clock limit is half its
# CPU limit, and a worker forked after torch was imported can deadlock. Re-run them (--keep) with
# benches/mutation_recheck.py, which also checks a new test against its mutant.
# See benches/MUTATION.md for the last recorded scores and the surviving mutants.
set -euo pipefail

RUST_SCOPE=(rust/ideal_dp.rs rust/throughput/max_load.rs rust/mtpp/slicegraph.rs rust/mtpp/search.rs
            rust/mtpp/exact.rs rust/mtpp/fenwick.rs rust/training/dp.rs rust/training/knapsack.rs
            rust/training/model.rs rust/training/reconstruct.rs rust/training/table.rs rust/training/work.rs
            rust/latency/mod.rs rust/latency/asap.rs rust/latency/batch.rs rust/latency/maxset.rs
            rust/latency/rrr.rs)
PY_SCOPE=(python/stagecut/throughput/evaluate.py python/stagecut/mtpp/model.py
          python/stagecut/training/evaluate.py python/stagecut/mtpp/certify.py
          python/stagecut/sweep/spec.py python/stagecut/sweep/run.py python/stagecut/sweep/report.py
          python/stagecut/sweep/table.py python/stagecut/balance.py
          python/stagecut/frontends/export.py python/stagecut/frontends/split.py)

# the tests that exercise each Python module (mutmut runs only those covering a mutated function)
py_tests() {
    case "$1" in
        python/stagecut/throughput/*) echo "tests/throughput tests/test_inputs.py" ;;
        python/stagecut/mtpp/certify.py) echo "tests/mtpp/test_bounds.py tests/mtpp/test_results.py" ;;
        python/stagecut/mtpp/*) echo "tests/mtpp" ;;
        python/stagecut/training/*) echo "tests/training" ;;
        python/stagecut/sweep/spec.py) echo "tests/sweep/test_spec.py tests/sweep/test_*_bite.py" ;;
        python/stagecut/sweep/report.py|python/stagecut/sweep/table.py)
            echo "tests/sweep/test_report.py tests/sweep/test_*_bite.py" ;;
        python/stagecut/sweep/*) echo "tests/sweep tests/test_progress.py" ;;
        python/stagecut/balance.py) echo "tests/test_balance.py tests/test_balance_*.py" ;;
        python/stagecut/frontends/export.py|python/stagecut/frontends/split.py)
            echo "tests/frontends/test_export.py tests/frontends/test_export_logic.py tests/frontends/test_split.py
                  tests/test_export_*.py" ;;
        *) echo "tests" ;;
    esac
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=${MUTATION_BASE:-HEAD}
JOBS=1
TIMEOUT=300
OUT=$ROOT/target/mutation
DO_RUST=1
DO_PY=1
ALL=0
KEEP=0
SAMPLE=${MUTATION_SAMPLE:-0}
SEED=${MUTATION_SEED:-0}
PY_TESTS=""
RUST_TESTS=""
PY_TIMEOUT_FACTOR=15
NICE=${MUTATION_NICE:-15}
FILES=()
while [ $# -gt 0 ]; do
    case "$1" in
        --base) BASE=$2; shift ;;
        --rust-only) DO_PY=0 ;;
        --python-only) DO_RUST=0 ;;
        --jobs) JOBS=$2; shift ;;
        --timeout) TIMEOUT=$2; shift ;;
        --out) OUT=$(realpath -m "$2"); shift ;;
        --all) ALL=1 ;;
        --keep) KEEP=1 ;;
        --sample) SAMPLE=$2; shift ;;
        --seed) SEED=$2; shift ;;
        --py-tests) PY_TESTS=$2; shift ;;
        --rust-tests) RUST_TESTS=$2; shift ;;
        --py-timeout-factor) PY_TIMEOUT_FACTOR=$2; shift ;;
        -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
        -*) echo "mutation.sh: unknown option $1" >&2; exit 2 ;;
        *) FILES+=("$1") ;;
    esac
    shift
done

cd "$ROOT"
if [ ${#FILES[@]} -eq 0 ]; then
    if [ "$ALL" = 1 ]; then
        FILES=("${RUST_SCOPE[@]}" "${PY_SCOPE[@]}")
    else
        changed=$( (git diff --name-only "$BASE" --; git ls-files --others --exclude-standard) | sort -u)
        for f in "${RUST_SCOPE[@]}" "${PY_SCOPE[@]}"; do
            if grep -qxF "$f" <<<"$changed"; then FILES+=("$f"); fi
        done
        if [ ${#FILES[@]} -eq 0 ]; then
            echo "mutation.sh: no solver or evaluator file changed against $BASE (give files, --base or --all)"
            exit 0
        fi
    fi
fi
RUST_FILES=()
PY_FILES=()
for f in "${FILES[@]}"; do
    [ -f "$f" ] || { echo "mutation.sh: no file $f" >&2; exit 2; }
    case "$f" in
        *.rs) [ "$DO_RUST" = 1 ] && RUST_FILES+=("$f") ;;
        python/stagecut/*.py) [ "$DO_PY" = 1 ] && PY_FILES+=("$f") ;;
        *) echo "mutation.sh: $f is neither Rust nor under python/stagecut" >&2; exit 2 ;;
    esac
done
echo "mutation.sh: Rust: ${RUST_FILES[*]:-none}; Python: ${PY_FILES[*]:-none}"
[[ "$SAMPLE" =~ ^[0-9]+$ && "$SEED" =~ ^[0-9]+$ ]] || { echo "mutation.sh: --sample and --seed take whole numbers" >&2; exit 2; }
[ "$SAMPLE" -gt 0 ] && echo "mutation.sh: a sample of $SAMPLE mutants per file, seed $SEED"

# sample NAMES_FILE: print SAMPLE names of each file (the text before the first ':' or, for
# mutmut's dotted names, the module) drawn with SEED, in their listed order; all when SAMPLE is 0
sample() {
    python3 - "$1" "$SAMPLE" "$SEED" <<'PY'
import random, sys
names = [line.rstrip("\n") for line in open(sys.argv[1]) if line.strip()]
n, seed = int(sys.argv[2]), int(sys.argv[3])
by_file = {}
for name in names:
    key = name.split(":", 1)[0] if ":" in name else name.rsplit(".x", 1)[0]
    by_file.setdefault(key, []).append(name)
for key in sorted(by_file):
    group = by_file[key]
    if n and n < len(group):
        keep = set(random.Random(f"{seed}:{key}").sample(range(len(group)), n))
        group = [g for i, g in enumerate(group) if i in keep]
    print("\n".join(group))
PY
}

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/stagecut-mutation.XXXXXX")
cleanup() { if [ "$KEEP" = 1 ]; then echo "scratch copy kept: $SCRATCH"; else rm -rf "$SCRATCH"; fi; }
trap cleanup EXIT
while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
    < <(git ls-files -z --cached --others --exclude-standard) | tar --null -T - -cf - | tar -xf - -C "$SCRATCH"
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"

if [ ${#RUST_FILES[@]} -gt 0 ]; then
    command -v cargo-mutants >/dev/null || { echo "mutation.sh: cargo install cargo-mutants --locked" >&2; exit 2; }
    args=()
    for f in "${RUST_FILES[@]}"; do args+=(--file "$f"); done
    rm -rf "$OUT/rust"
    mkdir -p "$OUT/rust"
    if [ "$SAMPLE" -gt 0 ]; then
        (cd "$SCRATCH" && cargo mutants --list "${args[@]}") > "$OUT/rust/all.txt"
        sample "$OUT/rust/all.txt" > "$OUT/rust/sample.txt"
        echo "mutation.sh: Rust: $(grep -c . "$OUT/rust/sample.txt") of $(grep -c . "$OUT/rust/all.txt") mutants"
        # one anchored, escaped alternative per sampled mutant's name
        args+=(--re "$(python3 -c 'import re, sys; print("|".join("^" + re.escape(l.rstrip("\n")) + "$" for l in open(sys.argv[1]) if l.strip()))' "$OUT/rust/sample.txt")")
    fi
    (cd "$SCRATCH" && CARGO_PROFILE_DEV_OPT_LEVEL=0 CARGO_PROFILE_DEV_DEBUG=0 CARGO_INCREMENTAL=1 \
        nice -n "$NICE" cargo mutants --no-shuffle --jobs "$JOBS" --timeout "$TIMEOUT" --output "$OUT/rust" \
        "${args[@]}" -- $RUST_TESTS) || true  # exits non-zero when a mutant survives
    mo=$OUT/rust/mutants.out
    # grep -c prints 0 and exits 1 on an empty file: one number either way
    count() { if [ -f "$mo/$1.txt" ]; then grep -c . "$mo/$1.txt" || true; else echo 0; fi; }
    caught=$(count caught); missed=$(count missed); timeout=$(count timeout); unviable=$(count unviable)
    viable=$((caught + missed + timeout))
    {
        echo "Rust (cargo-mutants): ${RUST_FILES[*]}"
        echo "  caught $caught, timeout $timeout, missed $missed, unviable $unviable"
        [ "$viable" -gt 0 ] && awk -v k=$((caught + timeout)) -v v="$viable" \
            'BEGIN { printf "  score %.1f%% of %d viable mutants\n", 100 * k / v, v }'
        [ "$missed" -gt 0 ] && { echo "  missed:"; sed 's/^/    /' "$mo/missed.txt"; }
    } | tee -a "$SUMMARY"
fi

if [ ${#PY_FILES[@]} -gt 0 ]; then
    command -v mutmut >/dev/null || { echo "mutation.sh: pip install mutmut" >&2; exit 2; }
    # mutmut 3 imports the package from ./src: move python/ there in the scratch copy
    cp "$ROOT"/python/stagecut/_core*.so "$SCRATCH/python/stagecut/" 2>/dev/null \
        || { echo "mutation.sh: build the extension first (maturin develop)" >&2; exit 2; }
    mv "$SCRATCH/python" "$SCRATCH/src"
    only=""
    tests=""
    for f in "${PY_FILES[@]}"; do
        only+="    src/${f#python/}"$'\n'
        tests+=" $(py_tests "$f")"
    done
    [ -n "$PY_TESTS" ] && tests=$PY_TESTS
    # only the test files that exist (the patterns name optional extra files)
    tests=$(cd "$SCRATCH" && for t in $tests; do if [ -e "$t" ]; then echo "$t"; fi; done | sort -u | sed 's/^/    /')
    cat > "$SCRATCH/setup.cfg" <<EOF
[mutmut]
source_paths = src
timeout_multiplier = $PY_TIMEOUT_FACTOR
only_mutate =
$only
pytest_add_cli_args =
    -p
    no:cacheprovider
    -o
    addopts=
    -m
    not slow
    -q
pytest_add_cli_args_test_selection =
$tests
EOF
    rm -rf "$OUT/python"
    mkdir -p "$OUT/python"
    names=()
    if [ "$SAMPLE" -gt 0 ]; then
        # generate the mutants only (mutmut 3 writes each file's mutant names to its .meta), then
        # run the sampled ones by name
        (cd "$SCRATCH" && python3 -c '
import json, os, pathlib, sys
from mutmut.__main__ import create_mutants
from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir
os.makedirs("mutants", exist_ok=True)
copy_src_dir(); copy_also_copy_files(); create_mutants(1)
with open(sys.argv[1], "w") as out:
    for meta in sorted(pathlib.Path("mutants").rglob("*.py.meta")):
        for name in json.load(open(meta))["exit_code_by_key"]:
            print(name, file=out)
' "$OUT/python/all.txt" > "$OUT/python/generate.log" 2>&1)
        sample "$OUT/python/all.txt" > "$OUT/python/sample.txt"
        mapfile -t names < "$OUT/python/sample.txt"
        echo "mutation.sh: Python: ${#names[@]} of $(grep -c . "$OUT/python/all.txt") mutants"
    fi
    (cd "$SCRATCH" && nice -n "$NICE" mutmut run --max-children "$JOBS" "${names[@]}" > "$OUT/python/run.log" 2>&1) || true
    (cd "$SCRATCH" && mutmut results > "$OUT/python/survivors.txt" 2>&1 || true
     mutmut export-cicd-stats > /dev/null 2>&1 && cp mutants/mutmut-cicd-stats.json "$OUT/python/" || true)
    python3 - "$OUT/python/mutmut-cicd-stats.json" "${PY_FILES[*]}" <<'EOF' | tee -a "$SUMMARY"
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except OSError:
    sys.exit("Python (mutmut): no statistics (see run.log)")
killed, timeout, survived = s.get("killed", 0), s.get("timeout", 0), s.get("survived", 0)
viable = killed + timeout + survived
print(f"Python (mutmut): {sys.argv[2]}")
print(f"  killed {killed}, timeout {timeout}, survived {survived}, no tests {s.get('no_tests', 0)}, "
      f"skipped {s.get('skipped', 0)}, suspicious {s.get('suspicious', 0)}")
if viable:
    print(f"  score {100 * (killed + timeout) / viable:.1f}% of {viable} viable mutants")
EOF
    if grep -q . "$OUT/python/survivors.txt" 2>/dev/null; then
        echo "  survivors: $OUT/python/survivors.txt (mutmut show NAME in the scratch copy: --keep)" | tee -a "$SUMMARY"
    fi
fi
echo "summary: $SUMMARY"
