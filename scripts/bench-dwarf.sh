#!/usr/bin/env bash
# The native fold of a DWARF capture against `perf script | devprof fold -` and
# `samply import` on the same perf.data, with every binary at its recorded path so that
# each tool really unwinds and names:
#   - by default a program without frame pointers (the golden capture's dwarf-loop.c,
#     built against this host's glibc) recorded on this host with `--call-graph dwarf`;
#   - with --container NAME, perf record of its process (PROCESS, default demo-node) in
#     the container, perf script's own fold of it there kept as the reference, and the
#     container's files exported to a directory: devprof and this host's perf script read
#     them through --symfs, samply runs chrooted there.
# Prints wall and CPU time, peak RSS, sample totals and the share of samples whose stack
# is identical to perf script's.
#
#   scripts/bench-dwarf.sh [--container NAME] [SECONDS] [HZ]   (defaults: 20 s at 999 Hz)
#   KEEP=1 keeps the work directory; QUIET=1 pauses the running containers while timing;
#   RUNS=N times each fold N times, the tools taking turns (the median run printed).
# Needs perf, /usr/bin/time, gcc, python3 and target/release/devprof (and, for a
# container, the devnet with perf in the container, and root for chroot); samply from $SAMPLY, PATH, or installed
# into a temporary directory (cargo install samply).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
container=""
if [ "${1:-}" = "--container" ]; then container="$2"; shift 2; fi
seconds="${1:-20}"; hz="${2:-999}"
devprof="${DEVPROF:-$PWD/target/release/devprof}"
work="$(mktemp -d /tmp/devprof-bench-dwarf.XXXXXX)"
[ -n "${KEEP:-}" ] && echo "work: $work" >&2 || trap 'rm -rf "$work"' EXIT

samply="${SAMPLY:-$(command -v samply || true)}"
if [ -z "$samply" ]; then
    if cargo install samply --locked --root "$work/samply" >"$work/samply-install.log" 2>&1; then
        samply="$work/samply/bin/samply"
    else
        echo "samply did not build (see $work/samply-install.log); compared without it" >&2
    fi
fi

root=/
if [ -n "$container" ]; then
    # perf record in the container (uncompressed: samply reads no zstd records), the file
    # copied out, and perf script's own text of it from inside the container: the reference.
    pid="$(docker exec "$container" pidof -s "${PROCESS:-demo-node}")"
    in_container=/tmp/devprof-bench-dwarf.data
    docker exec "$container" perf record -q -N -F "$hz" --call-graph dwarf -p "$pid" \
        -o "$in_container" -- sleep "$seconds" >/dev/null 2>&1
    docker cp -q "$container:$in_container" "$work/bench.data"
    start=$(date +%s%N)
    docker exec "$container" perf script -i "$in_container" -F comm,pid,tid,time,event,ip,sym,dso \
        --no-inline 2>/dev/null | "$devprof" fold - -o "$work/in-container.folded" 2>/dev/null
    echo "perf script | fold in the container: $(( ($(date +%s%N) - start) / 1000000 )) ms"
    docker exec "$container" rm -f "$in_container"
    root="$work/root"; mkdir "$root"
    docker export "$container" | tar -x -C "$root" --exclude='proc/*' --exclude='sys/*' --exclude='dev/*' 2>/dev/null || true
    echo "perf.data: $(du -h "$work/bench.data" | cut -f1), ${seconds} s of $container (pid $pid) at ${hz} Hz"
else
    gcc -O2 -fomit-frame-pointer -fasynchronous-unwind-tables -o "$work/dwarf-loop" \
        tests/data/native/dwarf-loop.c
    perf record -q -F "$hz" --call-graph dwarf -o "$work/bench.data" -- "$work/dwarf-loop" "$seconds" >/dev/null
    echo "perf.data: $(du -h "$work/bench.data" | cut -f1), ${seconds} s at ${hz} Hz"
fi

# QUIET=1: every running container is paused while the folds are timed (a devnet loads
# a 2-core host), Docker's and, where Podman is installed, Podman's (the test bed's pods
# keep a core busy on their own), and unpaused after.
if [ -n "${QUIET:-}" ]; then
    paused="$(docker ps -q --filter status=running)"
    [ -z "$paused" ] || docker pause $paused >/dev/null
    podman_paused=""
    if command -v podman >/dev/null; then
        podman_paused="$(podman ps -q --filter status=running 2>/dev/null || true)"
        [ -z "$podman_paused" ] || podman pause $podman_paused >/dev/null
    fi
    trap '[ -z "$paused" ] || docker unpause $paused >/dev/null; [ -z "$podman_paused" ] || podman unpause $podman_paused >/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
    sleep 3
fi

# name, command: one run's wall, user+sys CPU and peak RSS (from /usr/bin/time -v),
# added to the name's runs.
time_once() {
    local name="$1"; shift
    # Wall time to the millisecond (time's own is to 10 ms, a sixth of a small fold).
    local start end
    start=$(date +%s%N)
    /usr/bin/time -v -o "$work/$name.time" "$@" 2>"$work/$name.err" >/dev/null
    end=$(date +%s%N)
    awk -F': ' -v wall="$(( (end - start) / 1000000 ))" '
        BEGIN { wall /= 1000 }
        /User time/ { cpu += $2 } /System time/ { cpu += $2 }
        /Maximum resident/ { rss = $2 / 1024 }
        END { printf "%.3f %.2f %.0f\n", wall, cpu, rss }' "$work/$name.time" >>"$work/$name.runs"
}

# The run of median wall time of a name, with the range.
summarize() {
    sort -n "$work/$1.runs" | awk -v name="$1" '
        { wall[NR] = $1; cpu[NR] = $2; rss[NR] = $3 }
        END { m = int((NR + 1) / 2)
              printf "%-22s wall %7.3f s (%.3f-%.3f)  cpu %7.2f s  peak RSS %6.0f MiB  (%d runs)\n",
                  name, wall[m], wall[1], wall[NR], cpu[m], rss[m], NR }'
}

# As beside every capture in devprof's store, a .symbols directory keeps this boot's kernel
# symbols: the first fold reads /proc/kallsyms (the kernel makes it line by line, 40-80 ms
# of CPU) and keeps them, as a capture's fold does; perf script reads the copy perf record
# kept in ~/.debug. The first fold is timed apart ("native-first").
mkdir "$work/.symbols"
time_once native-first "$devprof" fold "$work/bench.data" --symfs "$root" -o "$work/native.folded"
summarize native-first
if [ -n "$samply" ] && [ "$root" != / ]; then
    # Chrooted into the container's files, where the recorded paths lead to its binaries.
    cp "$samply" "$root/samply"; ln "$work/bench.data" "$root/bench.data"
fi
# RUNS=N (default 1) rounds, each tool once per round: a drift of the machine's speed
# (steal time) falls on every tool alike.
tools="native perf-script"
[ -z "$samply" ] || tools="$tools samply"
for run in $(seq "${RUNS:-1}"); do
    time_once native "$devprof" fold "$work/bench.data" --symfs "$root" -o "$work/native.folded"
    time_once perf-script sh -c "perf script -i '$work/bench.data' --symfs '$root' -F comm,pid,tid,time,event,ip,sym,dso --no-inline 2>/dev/null | '$devprof' fold - -o '$work/script.folded'"
    if [ -z "$samply" ]; then
        :
    elif [ "$root" = / ]; then
        time_once samply "$samply" import "$work/bench.data" --save-only --unstable-presymbolicate -o "$work/samply.json.gz"
    else
        time_once samply chroot "$root" /samply import /bench.data --save-only --unstable-presymbolicate -o /samply.json.gz
    fi
done
for name in $tools; do summarize "$name"; done
if [ -n "$samply" ] && [ "$root" != / ]; then mv "$root"/samply.json* "$work/"; fi

python3 - "$work" <<'PY'
import os, sys
work = sys.argv[1]
sys.path.insert(0, "scripts")
from folded_compare import compare
native, script = compare(work)
reference = os.path.join(work, "in-container.folded")
if os.path.exists(reference):
    from folded_compare import load, identical
    total, same = identical(native, load(reference))
    print(f"against perf script in the container: {total} samples, identical stacks {same} "
          f"({100.0 * same / max(total, 1):.2f}%)")
    # perf's unwinder stops at JIT code (a runtime's stacks end there in its text); of
    # its stacks, how many are exactly the innermost frames of one of devprof's.
    from collections import Counter
    tails = Counter()
    for stack, n in load(reference).items():
        tails[tuple(stack.split(";")[1:])] += n
    found = Counter()
    for stack, n in native.items():
        frames = stack.split(";")[1:]
        for k in range(1, len(frames) + 1):
            if tuple(frames[-k:]) in tails:
                found[tuple(frames[-k:])] += n
                break
    inner = sum(min(n, found[t]) for t, n in tails.items())
    print(f"  perf script's stacks that are devprof's innermost frames: {inner} "
          f"({100.0 * inner / max(total, 1):.2f}%)")
PY
if [ -f "$work/samply.json.gz" ]; then
    python3 scripts/samply_names.py "$work/samply.json.gz" "$work/native.folded" "$root"
fi
