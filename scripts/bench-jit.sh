#!/usr/bin/env bash
# JIT code folded natively against `perf script`, on one recording: a perf capture of a
# runtime container (demo-jvm or demo-js) made with `--fold perf-script --keep-script`
# keeps both the perf.data and the text perf script printed in the container (JIT frames
# named from the runtime's perf map there). The container's files (with its
# /tmp/perf-<pid>.map) are exported to a directory, and `devprof fold FILE.data --symfs`
# folds the same perf.data natively from them. Prints the time of each fold, the sample
# totals and the share of samples whose whole stack is identical, and the share of the
# samples with a JIT frame that are named as perf script names them.
#
#   scripts/bench-jit.sh [CONTAINER] [SECONDS] [CALL_GRAPH]   (defaults: demo-jvm 10 fp)
# Needs the devnet (scripts/testbed-up.sh all), docker, python3 and target/release/devprof.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
container="${1:-demo-jvm}"; seconds="${2:-10}"; call_graph="${3:-fp}"
devprof="${DEVPROF:-$PWD/target/release/devprof}"
work="$(mktemp -d /tmp/devprof-bench-jit.XXXXXX)"
trap 'rm -rf "$work"' EXIT

"$devprof" -q cpu "$container" "$seconds" --engine perf --call-graph "$call_graph" \
    --fold perf-script --keep-script --output-dir "$work/store" >/dev/null
stem="$(ls "$work/store/$container"/perf-*.json | head -n 1)"; stem="${stem%.json}"
echo "capture: $(du -h "$stem.data" | cut -f1) perf.data, ${seconds} s of $container ($call_graph)"

# The container's files as the recorded process saw them, perf maps included.
mkdir "$work/root"
docker export "$container" | tar -x -C "$work/root" --exclude='proc/*' --exclude='sys/*' --exclude='dev/*' 2>/dev/null || true
ls "$work/root/tmp"/perf-*.map >/dev/null 2>&1 || { echo "no perf map in $container's /tmp" >&2; exit 1; }

timed() {
    local name="$1"; shift
    local start end
    start=$(date +%s%N)
    "$@" 2>"$work/$name.err" >/dev/null
    end=$(date +%s%N)
    printf '%-28s %6d ms\n' "$name" $(( (end - start) / 1000000 ))
}
timed "native fold (devprof)" "$devprof" fold "$stem.data" --symfs "$work/root" -o "$work/native.folded"
timed "fold of perf script text" "$devprof" fold "$stem.script" -o "$work/script.folded"
echo "perf script in the container (the capture's own fold step): $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['timings_ms'].get('fold'), 'ms')" "$stem.json")"
sed 's/^/  native: /' "$work/native fold (devprof).err" | head -n 5

python3 - "$work" <<'PY'
import os, sys
work = sys.argv[1]
sys.path.insert(0, "scripts")
from folded_compare import compare, identical
native, script = compare(work)
# JIT frames: the names the perf maps list; the share of perf script's samples with such
# a frame that the native fold folded onto the very same stack.
import glob
names = set()
for path in glob.glob(os.path.join(work, "root/tmp/perf-*.map")):
    for line in open(path, errors="replace"):
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) == 3:
            names.add(parts[2].replace(" ", "_"))
            names.add(parts[2])
def jit(stack):
    return any(f in names for f in stack.split(";"))
jit_total, jit_same = identical(native, script, jit)
print(f"samples with a JIT frame: perf script {jit_total}; named and stacked alike natively "
      f"{jit_same} ({100.0 * jit_same / max(jit_total, 1):.2f}%)")
differ = sorted(((n - native.get(s, 0), s) for s, n in script.items() if n > native.get(s, 0)), reverse=True)[:3]
for n, s in differ:
    print(f"  perf script only ({n}): {s}")
differ = sorted(((n - script.get(s, 0), s) for s, n in native.items() if n > script.get(s, 0)), reverse=True)[:3]
for n, s in differ:
    print(f"  native only ({n}): {s}")
PY
