#!/usr/bin/env bash
# The native fold of a DWARF capture against `perf script | devprof fold -` and
# `samply import` on the same perf.data: a program without frame pointers (the golden
# capture's dwarf-loop.c, built against this host's glibc) recorded on this host with
# `--call-graph dwarf` so every binary is at its recorded path. Prints wall and CPU time,
# peak RSS, sample totals and the share of samples whose stack is identical to perf
# script's.
#
#   scripts/bench-dwarf.sh [SECONDS] [HZ]        (defaults: 20 s at 999 Hz)
# Needs perf, /usr/bin/time, gcc, python3 and target/release/devprof; samply from
# $SAMPLY, PATH, or installed into a temporary directory (cargo install samply).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds="${1:-20}"; hz="${2:-999}"
devprof="${DEVPROF:-$PWD/target/release/devprof}"
work="$(mktemp -d /tmp/devprof-bench-dwarf.XXXXXX)"
trap 'rm -rf "$work"' EXIT

samply="${SAMPLY:-$(command -v samply || true)}"
if [ -z "$samply" ]; then
    if cargo install samply --locked --root "$work/samply" >"$work/samply-install.log" 2>&1; then
        samply="$work/samply/bin/samply"
    else
        echo "samply did not build (see $work/samply-install.log); compared without it" >&2
    fi
fi

gcc -O2 -fomit-frame-pointer -fasynchronous-unwind-tables -o "$work/dwarf-loop" \
    tests/data/native/dwarf-loop.c
perf record -q -F "$hz" --call-graph dwarf -o "$work/bench.data" -- "$work/dwarf-loop" "$seconds" >/dev/null
echo "perf.data: $(du -h "$work/bench.data" | cut -f1), ${seconds} s at ${hz} Hz"

# name, command: wall, user+sys CPU, peak RSS from /usr/bin/time -v
measure() {
    local name="$1"; shift
    /usr/bin/time -v -o "$work/$name.time" "$@" 2>"$work/$name.err" >/dev/null
    awk -v name="$name" -F': ' '
        /Elapsed \(wall clock\)/ { n = split($2, p, ":"); wall = (n == 3 ? p[1] * 3600 + p[2] * 60 + p[3] : p[1] * 60 + p[2]) }
        /User time/ { cpu += $2 } /System time/ { cpu += $2 }
        /Maximum resident/ { rss = $2 / 1024 }
        END { printf "%-22s wall %7.2f s  cpu %7.2f s  peak RSS %6.0f MiB\n", name, wall, cpu, rss }' "$work/$name.time"
}

measure native "$devprof" fold "$work/bench.data" -o "$work/native.folded"
measure perf-script sh -c "perf script -i '$work/bench.data' -F comm,pid,tid,time,event,ip,sym,dso --no-inline 2>/dev/null | '$devprof' fold - -o '$work/script.folded'"
if [ -n "$samply" ]; then
    measure samply "$samply" import "$work/bench.data" --save-only --unstable-presymbolicate -o "$work/samply.json.gz"
fi

python3 - "$work" <<'PY'
import gzip, json, os, sys
work = sys.argv[1]
sys.path.insert(0, "scripts")
from folded_compare import compare
native, script = compare(work)
path = os.path.join(work, "samply.json.gz")
if os.path.exists(path):
    profile = json.load(gzip.open(path))
    samples = sum(t["samples"]["length"] for t in profile["threads"])
    print(f"samply: {samples} samples")
    # A spot check of its names: the functions of the first thread's string table.
    strings = profile.get("shared", {}).get("stringArray") or profile["threads"][0].get("stringArray", [])
    names = [s for s in strings if s in ("mix", "hash_chain", "table_walk", "one_round", "main")]
    print(f"samply names: {sorted(set(names))}")
PY
