#!/usr/bin/env bash
# Benchmark (not a test): the timeline and the heatmap page of a long capture. A real
# `perf script` capture of the demo node (tests/data/perf-script-demo-seq.txt) is replayed
# as THREADS threads sampled at 999 Hz for SECONDS seconds (its stacks drawn at random,
# times shifted with a real capture's jitter), then folded three ways: plain, with the timeline, and with the timeline and the
# heatmap page. Prints the sizes and write times, and, with chromium on the host, how long
# the page takes to load and to draw a selection, on the wall clock (scripts/heatmap-timing.py).
# Usage: scripts/bench-timeline.sh [SECONDS] [THREADS]     (default 60 16)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_LONG="${1:-60}"
THREADS="${2:-16}"
SAMPLE="${BENCH_SAMPLE:-tests/data/perf-script-demo-seq.txt}"

cargo build --release --locked -q -p devprof
BIN="$(pwd)/target/release/devprof"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

python3 - "$SAMPLE" "$SECONDS_LONG" "$THREADS" "$WORK/script.txt" <<'PY'
import random, sys
random.seed(1)
sample, seconds, threads, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
stacks = []
for block in open(sample).read().split("\n\n"):
    lines = block.strip("\n").split("\n")
    if len(lines) > 1:
        comm = lines[0].split()[0]
        stacks.append((comm, "\n".join(lines[1:])))
hz, t0 = 999, 1000.0
with open(out, "w") as f:
    n = 0
    for tick in range(seconds * hz):
        for thread in range(threads):
            t = t0 + tick / hz + random.uniform(0, 0.0005)
            comm, stack = random.choice(stacks)
            f.write(f"{comm} 7/{100 + thread} {t:.6f}: cpu-clock: \n{stack}\n\n")
            n += 1
print(f"synthesized: {seconds} s x {threads} threads x {hz} Hz = {n:,} samples", file=sys.stderr)
PY
SCRIPT_MB=$(du -m "$WORK/script.txt" | cut -f1)
echo "perf script text: ${SCRIPT_MB} MB"

elapsed() { local s=$(date +%s.%N); "$@" 2>/dev/null; python3 -c "print(f'{$(date +%s.%N) - $s:.2f}')"; }
t_plain=$(elapsed "$BIN" fold "$WORK/script.txt" -o "$WORK/plain.folded")
t_timeline=$(elapsed "$BIN" fold "$WORK/script.txt" -o "$WORK/t.folded" --timeline "$WORK/t.timeline")
t_heatmap=$(elapsed "$BIN" fold "$WORK/script.txt" -o "$WORK/h.folded" --timeline "$WORK/h.timeline" --heatmap "$WORK/h.html")
size() { python3 -c "import os,sys; print(f'{os.path.getsize(sys.argv[1]) / 1e6:.2f} MB')" "$1"; }
echo "fold:                          ${t_plain} s"
echo "fold + timeline:               ${t_timeline} s   timeline $(size "$WORK/t.timeline")"
echo "fold + timeline + heatmap:     ${t_heatmap} s   page $(size "$WORK/h.html")"

if ! command -v chromium >/dev/null; then
  echo "chromium not installed: page load and selection not measured"
  exit 0
fi
# Load and selection on the wall clock (a virtual time budget reports 0 ms for both).
echo "page on the wall clock (headless chromium over the DevTools protocol):"
python3 scripts/heatmap-timing.py "$WORK/h.html" "$SECONDS_LONG" 5 | sed 's/^/  /'
