#!/usr/bin/env bash
# Benchmark (not a test): folding and rendering a large real `perf script` stream, devprof
# against the tools users have today, in one run on the same file:
#   devprof     `devprof fold - --svg`                  (its own parallel streaming folder)
#   inferno     `inferno-collapse-perf | inferno-flamegraph`  (installed from crates.io into
#               a cache directory by this script; default threads)
#   FlameGraph  `stackcollapse-perf.pl | flamegraph.pl`  (Perl; where FLAMEGRAPH_DIR or PATH
#               has them, else left out and said so)
# Each is timed (wall) with its peak memory (max RSS); the ratios are printed. The stream is a
# real capture of the demo node (tests/data/perf-script-demo-seq.txt) repeated to MB
# megabytes (default 600). Figures only: nothing is asserted. The load average is printed
# with them (on a shared machine, run it a few times and read the spread).
# Usage: scripts/bench-fold.sh [MB]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MB="${1:-${BENCH_MB:-600}}"
SAMPLE="${BENCH_SAMPLE:-tests/data/perf-script-demo-seq.txt}"
INFERNO_VERSION="${BENCH_INFERNO_VERSION:-0.12.8}"
TOOLS="${BENCH_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/devprof-bench}"

BIN="${DEVPROF_BIN:-$(pwd)/target/release/devprof}"
[ -n "${DEVPROF_BIN:-}" ] || cargo build --release --locked -q -p devprof

INFERNO="$TOOLS/inferno-$INFERNO_VERSION/bin"
if [ ! -x "$INFERNO/inferno-collapse-perf" ]; then
  echo "installing inferno $INFERNO_VERSION from crates.io into $TOOLS (once) ..." >&2
  cargo install -q --locked inferno --version "$INFERNO_VERSION" --root "$TOOLS/inferno-$INFERNO_VERSION" >&2
fi
FLAMEGRAPH="${FLAMEGRAPH_DIR:-}"
if [ -z "$FLAMEGRAPH" ] && command -v stackcollapse-perf.pl >/dev/null; then
  FLAMEGRAPH="$(dirname "$(command -v stackcollapse-perf.pl)")"
fi

python3 - "$BIN" "$SAMPLE" "$MB" "$INFERNO" "$FLAMEGRAPH" <<'PY'
import os, resource, subprocess, sys, tempfile, time

binary, sample, megabytes, inferno, flamegraph = sys.argv[1:6]
chunk = open(sample, "rb").read()
if not chunk.endswith(b"\n\n"):
    chunk = chunk.rstrip(b"\n") + b"\n\n"
repeats = max(1, (megabytes := int(megabytes)) * (1 << 20) // len(chunk) + 1)

def run(name, shell, tmp, big):
    """Runs a shell pipeline on the stream; returns (seconds, peak RSS MB of its processes)."""
    script = os.path.join(tmp, name + ".sh")
    with open(script, "w") as f:
        f.write("set -e -o pipefail\n" + shell + "\n")
    # A wrapper process per run, so its children's max RSS covers only this pipeline.
    wrapper = ("import resource, subprocess, sys; "
               "code = subprocess.run(['bash', sys.argv[1]]).returncode; "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
               "sys.exit(code)")
    with open(big, "rb") as stream:
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", wrapper, script], stdin=stream,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"{name} failed: {proc.stderr.decode()[-500:]}")
    peak_kib = int(proc.stderr.decode().strip().splitlines()[-1])
    return elapsed, peak_kib / 1024

with tempfile.TemporaryDirectory() as tmp:
    big = os.path.join(tmp, "perf.script")
    with open(big, "wb") as out:
        for _ in range(repeats):
            out.write(chunk)
    size = os.path.getsize(big)
    rows = []
    secs, rss = run("devprof", f"{binary} fold - -o {tmp}/devprof.folded --svg {tmp}/devprof.svg 2>/dev/null", tmp, big)
    rows.append(("devprof fold+svg", secs, rss))
    secs, rss = run("inferno", f"{inferno}/inferno-collapse-perf | {inferno}/inferno-flamegraph > {tmp}/inferno.svg", tmp, big)
    rows.append(("inferno collapse|flamegraph", secs, rss))
    if flamegraph:
        secs, rss = run("perl", f"{flamegraph}/stackcollapse-perf.pl | {flamegraph}/flamegraph.pl > {tmp}/perl.svg", tmp, big)
        rows.append(("FlameGraph (Perl)", secs, rss))
    stacks = sum(1 for _ in open(os.path.join(tmp, "devprof.folded")))

print(f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
print(f"input    {size / 1e6:,.0f} MB of perf script ({repeats} x {os.path.basename(sample)}), {stacks} distinct stacks, {os.cpu_count()} cores")
print(f"{'tool':<30} {'wall s':>8} {'MB/s':>8} {'peak MB':>8} {'devprof is':>11}")
ours = rows[0][1]
for name, secs, rss in rows:
    ratio = "" if name.startswith("devprof") else f"{secs / ours:.2f}x faster"
    print(f"{name:<30} {secs:>8.2f} {size / 1e6 / secs:>8.1f} {rss:>8.1f} {ratio:>11}")
if not flamegraph:
    print("FlameGraph (Perl) not found: set FLAMEGRAPH_DIR to a checkout of brendangregg/FlameGraph to compare")
PY
