#!/usr/bin/env bash
# The default test suite, N times in a row (default 20) on the current checkout, under a parallel
# CPU load of two busy workers (stress-ng --cpu 2), stopping at the first run that does not pass:
#
#   benches/stress.sh [N]
#   STRESS_PYTEST_ARGS="-n 4" benches/stress.sh 20    # the same suite in 4 pytest-xdist workers
#
# Each run appends one row to benches/STRESS.md (date, commit, passed/failed counts, wall and CPU
# seconds); the full output of the last run is in $STRESS_LOG (default /tmp/stagecut-stress.log).
# The suite is the one .ci/run runs (CI=true, which deselects `slow`). Exit status: 0 when all N
# runs passed, 1 at the first that did not, 2 on bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-20}
if ! [[ "$N" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: benches/stress.sh [N]  (N: runs, a positive integer; default 20)" >&2
    exit 2
fi
command -v stress-ng >/dev/null || { echo "stress.sh: stress-ng is not installed (apt-get install stress-ng)" >&2; exit 2; }
LOG=${STRESS_LOG:-/tmp/stagecut-stress.log}
TABLE=benches/STRESS.md
TIMES=$(mktemp)

stress-ng --cpu 2 --timeout 0 --quiet &
STRESS=$!
trap 'kill "$STRESS" 2>/dev/null; wait "$STRESS" 2>/dev/null; rm -f "$TIMES"' EXIT
trap 'exit 130' INT TERM

ARGS=${STRESS_PYTEST_ARGS:-}
commit=$(git rev-parse --short HEAD)
# the runs test the working tree: say so when it differs from the commit
git diff --quiet HEAD -- python rust tests pyproject.toml 2>/dev/null || commit="$commit+changes"
[ -n "$ARGS" ] && commit="$commit \`$ARGS\`"

for ((i = 1; i <= N; i++)); do
    when=$(date -u +"%Y-%m-%d %H:%M")
    CI=true /usr/bin/time -f "%e %U %S" -o "$TIMES" python -m pytest -q -p no:cacheprovider $ARGS >"$LOG" 2>&1
    code=$?
    # (GNU time puts "Command exited with non-zero status N" before its line when the run failed)
    read -r wall user sys < <(tail -n 1 "$TIMES") || { wall=0; user=0; sys=0; }
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.0f", u + s }')
    summary=$(grep -E "^=*.* in [0-9.]+s" "$LOG" | tail -1)
    count() { grep -oE "[0-9]+ $1" <<<"$summary" | grep -oE "^[0-9]+" || echo 0; }
    passed=$(count passed)
    failed=$(( $(count failed) + $(count error) ))
    printf "| %s | %s | %d/%d | %s | %s | %s | %s |\n" "$when" "$commit" "$i" "$N" "$passed" "$failed" \
        "$(printf %.0f "$wall")" "$cpu" >>"$TABLE"
    echo "run $i/$N: $passed passed, $failed failed, ${wall} s wall, ${cpu} s CPU (exit $code)"
    if [ "$code" -ne 0 ]; then
        echo "stress.sh: run $i failed; its output is in $LOG:" >&2
        grep -E "^(FAILED|ERROR) " "$LOG" >&2
        exit 1
    fi
done
echo "stress.sh: $N of $N runs passed"
