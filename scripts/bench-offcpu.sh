#!/usr/bin/env bash
# Benchmark (not a test): off-CPU summary throughput, full mode (perf script in the
# container, stacks symbolized) against fast mode (perf.data read directly, no stacks),
# on the same capture of at least 1 million events. The events come from a container of
# the demo image running `dd bs=64` (two syscalls per 64 bytes), recorded with the
# iobandwidth config. Needs the demo image (scripts/testbed-up.sh).
# Usage: scripts/bench-offcpu.sh [SECONDS]   (default 4)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_TO_RECORD="${1:-4}"
IMAGE="${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}"
NAME="devprof-bench-offcpu-$$"
OUT="$(mktemp -d /tmp/devprof-bench.XXXXXX)"
cleanup() { docker rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$OUT"; }
trap cleanup EXIT

cargo build --release --locked -q -p devprof
BIN="$(pwd)/target/release/devprof"
docker image inspect "$IMAGE" >/dev/null 2>&1 || { echo "no $IMAGE: run scripts/testbed-up.sh first" >&2; exit 1; }
docker run -d --name "$NAME" --cap-add SYS_ADMIN --cap-add IPC_LOCK --security-opt seccomp=unconfined \
  -v /sys/kernel/tracing:/sys/kernel/tracing "$IMAGE" dd if=/dev/zero of=/dev/null bs=64 >/dev/null

"$BIN" --output-dir "$OUT" offcpu "$NAME" "$SECONDS_TO_RECORD" --config iobandwidth --full --json >"$OUT/full.json"
MANIFEST="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifest"])' "$OUT/full.json")"
DATA="${MANIFEST%.json}.data"

start=$(date +%s.%N)
"$BIN" summarize --json "$DATA" >"$OUT/fast.json" 2>"$OUT/fast.err"
end=$(date +%s.%N)

python3 - "$MANIFEST" "$OUT/fast.json" "$start" "$end" "$DATA" <<'PY'
import json, os, sys
manifest = json.load(open(sys.argv[1]))
fast = json.load(open(sys.argv[2]))
fast_s = float(sys.argv[4]) - float(sys.argv[3])
events = manifest["sample_count"]
full_s = manifest["timings_ms"]["summarize"] / 1000
print(f"capture          {events:,} events in {manifest['duration_recorded_s']:.1f} s, perf.data {os.path.getsize(sys.argv[5]) / 1e6:.1f} MB")
print(f"full mode        {full_s:.2f} s  ({events / full_s:,.0f} events/s; perf script in the container + parse + aggregate)")
print(f"fast mode        {fast_s:.2f} s  ({fast['total_events'] / fast_s:,.0f} events/s; perf.data read directly, whole command)")
print(f"speed-up         {full_s / fast_s:.1f}x")
same = fast["counts"] == manifest["offcpu"]["counts"]
print(f"same counts      {'yes' if same else 'NO'}")
if events < 1_000_000:
    print("note: fewer than 1 million events; record longer (argument SECONDS)")
if not same:
    sys.exit(1)
PY
