#!/usr/bin/env bash
# Benchmark (not a test; prints figures, asserts nothing): what a capture costs the
# profiled node. A demo node of its own (this worktree's demo-node in an image derived from
# the demo image, tag BENCH_IMAGE) reports the work it does (DEMO_OPS_FILE); its throughput
# is read over WINDOW seconds (default 20) during `devprof cpu` at 999 Hz with frame
# pointers, with DWARF call graphs, from a sidecar, and (for reference: the kernel's share
# of the cost) during a bare `perf record -F 999 -g` started by `docker exec` (perf's
# default event, without devprof's -N and -z). Every capture is measured between two
# windows with no capture, and its throughput is given against the mean of those two, as a
# percentage lost (so a drift of the machine's load during a round does not count as
# overhead). Each round (RUNS, default 3) measures all four. The load average is printed:
# the machine may be shared, so read the spread between rounds as the noise.
#
#   scripts/bench-overhead.sh [WINDOW] [RUNS]
# Environment: BENCH_WORKLOADS (default hash_chain:40,state_lookup:40), DEVPROF_BIN,
# BENCH_BASE_IMAGE (default devprof-demo-node:latest), BENCH_QUIET=1 (pause the running
# containers of the demo devnet for the bench, unpaused at exit: on 2 cores their load
# makes the node's throughput swing by several percent from one window to the next).
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
PAUSED=()
cleanup() {
  docker rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$WORK"
  [ "${#PAUSED[@]}" -eq 0 ] || docker unpause "${PAUSED[@]}" >/dev/null || true
}
trap cleanup EXIT
if [ "${BENCH_QUIET:-}" = 1 ]; then
  mapfile -t PAUSED < <(docker ps -q --filter label=com.docker.compose.project=devprof-demo --filter status=running)
  [ "${#PAUSED[@]}" -eq 0 ] || docker pause "${PAUSED[@]}" >/dev/null
  echo "paused ${#PAUSED[@]} containers of the demo devnet for the bench"
fi

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

# The node's throughput while perf alone (no devprof) records it, for reference.
under_bare_perf() {
  local node
  node="$(docker exec "$NAME" sh -c 'grep -lx demo-node /proc/[0-9]*/comm | head -1 | cut -d/ -f3')"
  [ -n "$node" ] || { echo "no demo-node process in $NAME" >&2; echo 0; return; }
  docker exec "$NAME" timeout -s INT "$((WINDOW + 6))" perf record -q -F 999 -g -p "$node" -o /tmp/bare.data > "$WORK/bare.log" 2>&1 &
  local pid=$!
  until perf_running; do sleep 0.5; kill -0 "$pid" 2>/dev/null || { echo 0; return; }; done
  sleep 1
  rate
  wait "$pid" || true
  docker exec "$NAME" rm -f /tmp/bare.data
}

echo "node: $WORKLOADS; window ${WINDOW}s; $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# Each column: its name, then the command that measures it.
NAMES=("fp 999 Hz (exec)" "dwarf 999 Hz (exec)" "fp 999 Hz (sidecar)" "bare perf record fp")
CAPTURES=("under_capture --call-graph fp --mode exec" "under_capture --call-graph dwarf --mode exec"
          "under_capture --call-graph fp --mode sidecar" "under_bare_perf")
printf '%-6s' round; for c in "${NAMES[@]}"; do printf ' %28s' "$c (lost)"; done; echo
for round in $(seq "$RUNS"); do
  row=()
  before="$(rate)"
  for capture in "${CAPTURES[@]}"; do
    during="$($capture)"
    after="$(rate)"
    row+=("$before:$during:$after")
    before="$after"
  done
  echo "${row[*]}" >> "$WORK/rounds"
  python3 - "$round" "${row[@]}" <<'PY'
import sys
r, *cells = sys.argv[1:]
out = []
for cell in cells:
    before, during, after = map(float, cell.split(":"))
    base = (before + after) / 2
    out.append(f"{during:.0f} ({100 * (1 - during / base):+.1f}%)")
print(f"{r:<6} " + " ".join(f"{c:>28}" for c in out))
PY
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/rounds" "${NAMES[@]}" <<'PY'
import statistics, sys
rows = [[tuple(map(float, c.split(":"))) for c in l.split()] for l in open(sys.argv[1]) if l.strip()]
for i, name in enumerate(sys.argv[2:]):
    lost = [100 * (1 - d / ((b + a) / 2)) for b, d, a in (r[i] for r in rows) if b + a > 0]
    print(f"{name:<22} throughput lost: mean {statistics.mean(lost):.1f}%, median {statistics.median(lost):.1f}%, rounds {', '.join(f'{x:.1f}%' for x in lost)}")
PY
docker rmi "$IMAGE" >/dev/null 2>&1 || true
