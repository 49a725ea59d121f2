#!/usr/bin/env bash
# Benchmark (not a test; prints figures, asserts nothing): what a capture costs the
# profiled node. A demo node of its own (this worktree's demo-node in an image derived from
# the demo image, tag BENCH_IMAGE) reports the work it does (DEMO_OPS_FILE); its throughput
# is read over WINDOW seconds (default 20) with no capture, during `devprof cpu` at 999 Hz
# with frame pointers, with DWARF call graphs, and from a sidecar; each round (RUNS, default
# 3) measures all four in turn, and each capture's throughput is given against the
# baseline of its round, as a percentage lost. The load average is printed: the machine may
# be shared, so read the spread between rounds as the noise.
#
#   scripts/bench-overhead.sh [WINDOW] [RUNS]
# Environment: BENCH_WORKLOADS (default hash_chain:40,state_lookup:40), DEVPROF_BIN,
# BENCH_BASE_IMAGE (default devprof-demo-node:latest).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WINDOW="${1:-20}"; RUNS="${2:-3}"
BASE="${BENCH_BASE_IMAGE:-devprof-demo-node:latest}"
IMAGE="${BENCH_IMAGE:-devprof-demo-node:bench-ops}"
WORKLOADS="${BENCH_WORKLOADS:-hash_chain:40,state_lookup:40}"
NAME="devprof-bench-overhead-$$"
BIN="${DEVPROF_BIN:-$(pwd)/target/release/devprof}"
NODE="${DEMO_NODE_BIN:-$(pwd)/target/release/demo-node}"
[ -x "$BIN" ] && [ -x "$NODE" ] || cargo build --release --locked -q -p devprof -p demo-node
WORK="$(mktemp -d /tmp/devprof-bench-overhead.XXXXXX)"
cleanup() { docker rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT

# The image: the demo image with this tree's demo-node (which can report its work).
cp "$NODE" "$WORK/demo-node"
printf 'FROM %s\nCOPY demo-node /usr/local/bin/demo-node\n' "$BASE" > "$WORK/Dockerfile"
docker build -q -t "$IMAGE" "$WORK" >/dev/null
docker run -d --name "$NAME" --init --cap-add SYS_ADMIN --cap-add SYS_PTRACE --cap-add SYSLOG \
  --cap-add IPC_LOCK --security-opt seccomp=unconfined -e DEMO_WORKLOADS="$WORKLOADS" \
  -e DEMO_DATA_DIR=/tmp -e DEMO_OPS_FILE=/tmp/ops "$IMAGE" >/dev/null
sleep 3

ops() { docker exec "$NAME" cat /tmp/ops; }
perf_running() { docker exec "$NAME" sh -c 'grep -lx perf /proc/[0-9]*/comm' >/dev/null 2>&1; }
# Operations per second over WINDOW seconds, from the node's own clock and counter.
rate() {
  local a b
  a="$(ops)"; sleep "$WINDOW"; b="$(ops)"
  python3 -c "import sys; (t0, n0), (t1, n1) = [map(int, s.split()) for s in sys.argv[1:]]; print(f'{(n1 - n0) * 1000 / (t1 - t0):.0f}')" "$a" "$b"
}
# The node's throughput while devprof records it with the given options.
under_capture() {
  "$BIN" --output-dir "$WORK/store" cpu "$NAME" "$((WINDOW + 15))s" -F 999 "$@" > "$WORK/devprof.log" 2>&1 &
  local pid=$! waited=0
  until perf_running; do
    sleep 0.5; waited=$((waited + 1))
    if [ "$waited" -gt 120 ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "devprof did not start recording: $(tail -3 "$WORK/devprof.log")" >&2; wait "$pid" || true; echo 0; return
    fi
  done
  sleep 1
  rate
  wait "$pid" || echo "devprof failed: $(tail -3 "$WORK/devprof.log")" >&2
}

echo "node: $WORKLOADS; window ${WINDOW}s; $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %12s %22s %22s %22s\n' round "none ops/s" "fp 999 Hz ops/s (lost)" "dwarf ops/s (lost)" "sidecar fp ops/s (lost)"
for round in $(seq "$RUNS"); do
  base="$(rate)"
  fp="$(under_capture --call-graph fp --mode exec)"
  dwarf="$(under_capture --call-graph dwarf --mode exec)"
  side="$(under_capture --call-graph fp --mode sidecar)"
  echo "$base $fp $dwarf $side" >> "$WORK/rounds"
  python3 - "$round" "$base" "$fp" "$dwarf" "$side" <<'PY'
import sys
r, base, *rest = sys.argv[1:]
base = float(base)
cells = [f"{float(v):.0f} ({100 * (1 - float(v) / base):+.1f}%)" for v in rest]
print(f"{r:<6} {base:>12.0f} " + " ".join(f"{c:>22}" for c in cells))
PY
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/rounds" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
for i, name in enumerate(["fp 999 Hz (exec)", "dwarf 999 Hz (exec)", "fp 999 Hz (sidecar)"], 1):
    lost = [100 * (1 - r[i] / r[0]) for r in rows if r[0] > 0]
    print(f"{name:<22} throughput lost: mean {statistics.mean(lost):.1f}%, rounds {', '.join(f'{x:.1f}%' for x in lost)}")
PY
docker rmi "$IMAGE" >/dev/null 2>&1 || true
