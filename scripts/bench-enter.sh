#!/usr/bin/env bash
# Enter to summary (docs/benchmarks.md): `devprof -v cpu TARGET WINDOW_S` REPS times with
# each binary given (default: target/release/devprof), runs of the binaries interleaved so
# that the host's load falls on each alike. Prints each run's wall time and, per binary,
# the median, the overrun past the window, and the phases (`-v`) of its median run.
#
# Usage: scripts/bench-enter.sh [DEVPROF ...]
# Settings: TARGET (demo-seq), WINDOW_S (10), REPS (5).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${TARGET:-demo-seq}
WINDOW_S=${WINDOW_S:-10}
REPS=${REPS:-5}
[ $# -gt 0 ] || set -- target/release/devprof
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for rep in $(seq "$REPS"); do
  for i in $(seq $#); do
    bin=${!i}
    store="$out/store-$i"
    start=$(date +%s%N)
    "$bin" --output-dir "$store" -v cpu "$TARGET" "$WINDOW_S" >"$out/run-$i-$rep.out" 2>&1
    end=$(date +%s%N)
    ms=$(((end - start) / 1000000))
    echo "$ms" >"$out/run-$i-$rep.ms"
    echo "run $rep, $bin: $ms ms (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done
for i in $(seq $#); do
  bin=${!i}
  median_run=$(for rep in $(seq "$REPS"); do echo "$(cat "$out/run-$i-$rep.ms") $rep"; done |
    sort -n | sed -n "$(((REPS + 1) / 2))p")
  ms=${median_run% *}
  rep=${median_run#* }
  echo
  echo "$bin: median $ms ms, $((ms - WINDOW_S * 1000)) ms past the ${WINDOW_S} s window; phases of that run:"
  sed -n '/^time by phase:/,$p' "$out/run-$i-$rep.out"
done
