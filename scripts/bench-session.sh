#!/usr/bin/env bash
# Benchmark (not a test): wall time of one `devprof profile` of three containers over a
# SECONDS window against the same three `devprof cpu` captures run one after another.
# Needs the demo devnet (scripts/testbed-up.sh). Prints the figures; asserts nothing.
# Usage: scripts/bench-session.sh [SECONDS] [CONTAINER...]   (default 10 demo-seq demo-rpc demo-go)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WINDOW="${1:-10}"
shift || true
if [ "$#" -gt 0 ]; then TARGETS=("$@"); else TARGETS=(demo-seq demo-rpc demo-go); fi

# DEVPROF_BIN: a devprof already built (e.g. target/debug/devprof); else a release build.
if [ -n "${DEVPROF_BIN:-}" ]; then
  BIN="$(realpath "$DEVPROF_BIN")"
else
  cargo build --release --locked -q -p devprof
  BIN="$(pwd)/target/release/devprof"
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

t0=$(now)
"$BIN" --output-dir "$WORK/session" profile "${TARGETS[@]}" "$WINDOW" --kinds cpu > "$WORK/session.txt" 2> "$WORK/session.err" \
  || { echo "the session failed (exit $?):"; tail -5 "$WORK/session.err"; cat "$WORK/session.txt"; }
t1=$(now)
for t in "${TARGETS[@]}"; do
  "$BIN" --output-dir "$WORK/single" cpu "$t" "$WINDOW" > /dev/null 2>> "$WORK/single.err" \
    || { echo "devprof cpu $t failed:"; tail -3 "$WORK/single.err"; }
done
t2=$(now)

together=$(elapsed "$t0" "$t1")
apart=$(elapsed "$t1" "$t2")
echo "containers: ${TARGETS[*]}; window ${WINDOW} s; kinds: cpu"
echo "one profile session (all together): ${together} s wall"
echo "three cpu captures one after another: ${apart} s wall"
python3 -c "import sys; print(f'speed-up: {float(sys.argv[2]) / float(sys.argv[1]):.2f}x')" "$together" "$apart"
python3 - "$WORK/session" <<'PY'
import json, glob, sys
from datetime import datetime
starts = []
for path in glob.glob(sys.argv[1] + "/sessions/*.json"):
    for c in json.load(open(path))["captures"]:
        if c.get("window_started_at"):
            starts.append(datetime.fromisoformat(c["window_started_at"]))
if starts:
    spread = (max(starts) - min(starts)).total_seconds() * 1000
    print(f"recorder starts in the session: {len(starts)}, spread {spread:.0f} ms")
PY
