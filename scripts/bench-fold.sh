#!/usr/bin/env bash
# Benchmark (not a test): devprof's folding throughput and peak memory on a large real
# `perf script` stream. The stream is a real capture of the demo node
# (tests/data/perf-script-demo-seq.txt) repeated to BENCH_MB megabytes (default 600),
# piped into `devprof fold -` as perf script output is piped in a capture.
# Usage: scripts/bench-fold.sh [MB]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MB="${1:-${BENCH_MB:-600}}"
SAMPLE="${BENCH_SAMPLE:-tests/data/perf-script-demo-seq.txt}"

cargo build --release --locked -q -p devprof
BIN="$(pwd)/target/release/devprof"

python3 - "$BIN" "$SAMPLE" "$MB" <<'PY'
import os, resource, subprocess, sys, tempfile, time

binary, sample, megabytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
chunk = open(sample, "rb").read()
if not chunk.endswith(b"\n\n"):
    chunk = chunk.rstrip(b"\n") + b"\n\n"
repeats = max(1, (megabytes << 20) // len(chunk) + 1)

with tempfile.TemporaryDirectory() as tmp:
    big = os.path.join(tmp, "perf.script")
    with open(big, "wb") as out:
        for _ in range(repeats):
            out.write(chunk)
    size = os.path.getsize(big)
    with open(big, "rb") as stream:
        start = time.monotonic()
        proc = subprocess.run([binary, "fold", "-", "-o", os.path.join(tmp, "out.folded")],
                              stdin=stream, stderr=subprocess.PIPE, check=True)
        elapsed = time.monotonic() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    stacks = sum(1 for _ in open(os.path.join(tmp, "out.folded")))

print(f"input            {size / 1e6:,.0f} MB of perf script ({repeats} x {os.path.basename(sample)})")
print(f"devprof says     {proc.stderr.decode().strip()}")
print(f"folded stacks    {stacks}")
print(f"wall time        {elapsed:.2f} s")
print(f"throughput       {size / 1e6 / elapsed:,.1f} MB/s")
print(f"peak memory      {peak_kib / 1024:.1f} MB (max RSS)")
if peak_kib / 1024 >= 200:
    print("FAIL: peak memory is over the 200 MB budget")
    sys.exit(1)
PY
