#!/usr/bin/env bash
# Benchmark (not a test) of `devprof heap`: symbolization rate (addresses per second) and
# end-to-end time on the largest real dumps the demo node makes. A container of the demo
# image runs every workload with jemalloc sampling every allocation (lg_prof_sample:0) and
# accumulated counts (prof_accum:true), which gives its largest dumps; devprof asks it for
# BENCH_DUMPS dumps (default 20), then renders the newest (--latest) with an empty symbol
# cache (binaries fetched) and a warm one, and merges all of them (--all).
# Needs the demo image (scripts/testbed-up.sh). Usage: scripts/bench-heap.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
IMAGE="${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}"
DUMPS="${BENCH_DUMPS:-20}"
NAME="devprof-bench-heap-$$"

cargo build --release --locked -q -p devprof --bin devprof --example heap_symbolize_bench
BIN="$ROOT/target/release/devprof"
WORK="$(mktemp -d /tmp/devprof-bench-heap.XXXXXX)"
trap 'docker rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

docker run -d --name "$NAME" --init \
  -e DEMO_WORKLOADS=hash_chain:10,state_lookup:20,contend_lock:10,sync_writes:10,mmap_reads:10,alloc_blocks:20 \
  -e DEMO_LOCK_THREADS=16 -e DEMO_DATA_DIR=/tmp \
  -e _RJEM_MALLOC_CONF=prof:true,prof_accum:true,lg_prof_sample:0,prof_prefix:/tmp/jeprof \
  "$IMAGE" >/dev/null
sleep 10
pid="$(docker exec "$NAME" pgrep -x demo-node)"
for _ in $(seq "$DUMPS"); do docker exec "$NAME" kill -USR2 "$pid"; sleep 0.3; done
sleep 1

cd "$WORK"
secs() { python3 -c 'import sys,time; t=time.monotonic(); import subprocess; subprocess.run(sys.argv[1:], check=True, stdout=open("out.json","w")); print(f"{time.monotonic()-t:.2f}")' "$@"; }
cold="$(secs "$BIN" heap "$NAME" --latest --json)"
python3 - "$cold" <<'PY'
import json, sys
j = json.load(open("out.json"))
dump = [f for f in j["files"] if f["path"].endswith(".heap")][0]
t = j["timings_ms"]
print(f"largest dump      {dump['path'].rsplit('/',1)[1]}: {dump['bytes']:,} bytes, {j['stacks']} stacks with in-use bytes, {j['addresses']} distinct addresses ({j['addresses_symbolized']} named)")
print(f"--latest, cold    {sys.argv[1]} s end to end (fetch binaries {t['fetch_binaries']} ms, symbolize {t['symbolize']} ms: {j['addresses'] / max(t['symbolize'], 1) * 1000:,.0f} addresses/s)")
PY
warm="$(secs "$BIN" heap "$NAME" --latest --json)"
python3 - "$warm" <<'PY'
import json, sys
j = json.load(open("out.json")); t = j["timings_ms"]
print(f"--latest, warm    {sys.argv[1]} s end to end (symbol cache filled; symbolize {t['symbolize']} ms)")
PY
all="$(secs "$BIN" heap "$NAME" --all --json)"
python3 - "$all" <<'PY'
import json, sys
j = json.load(open("out.json"))
size = sum(f["bytes"] for f in j["files"] if f["path"].endswith(".heap"))
print(f"--all             {sys.argv[1]} s end to end: {len(j['dumps'])} dumps, {size:,} bytes, {j['stacks']} stacks merged")
PY
store="$WORK/profiling/$NAME"
newest="$(ls -t "$store"/jeprof.*.heap | head -1)"
node="$(ls "$store"/.symbols/*/demo-node)"
libc="$(ls "$store"/.symbols/*/libc.so.6)"
"$ROOT/target/release/examples/heap_symbolize_bench" "$newest" \
  "/usr/local/bin/demo-node=$node" "/usr/lib/x86_64-linux-gnu/libc.so.6=$libc"
