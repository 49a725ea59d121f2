#!/usr/bin/env bash
# Benchmark (not a test; prints figures, asserts nothing): two builds of devprof on the
# work of bench-native, bench-dwarf and bench-fold, in turns, on the same inputs:
#   native  `devprof fold perf.data --symfs ROOT`: a SECONDS-long 999 Hz frame-pointer
#           capture of demo-seq (made once, by the NEW build) and its container's files
#   dwarf   the same fold of a `--call-graph dwarf` recording of tests/data/native/dwarf-loop.c
#           on this host (bench-dwarf's default input)
#   fold    `devprof fold - --svg` of the demo node's perf script stream repeated to MB
#           megabytes (bench-fold's input)
# Each round runs every workload once with each build, the order of the builds swapped
# every round, so that a drift of the machine's speed falls on both alike; the running
# containers are paused while timing. Prints each median wall time and NEW/OLD.
#
#   scripts/bench-builds.sh OLD_DEVPROF NEW_DEVPROF [RUNS] [SECONDS] [MB]
#   (defaults: 7 runs, a 30 s capture, 300 MB)
# Needs the demo devnet, perf on this host, gcc, /usr/bin/time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OLD="$(realpath "$1")"; NEW="$(realpath "$2")"
RUNS="${3:-7}"; SECS="${4:-30}"; MB="${5:-300}"
WORK="${BENCH_WORK:-$(mktemp -d /tmp/devprof-bench-builds.XXXXXX)}"
paused=""
cleanup() {
  [ -z "$paused" ] || docker unpause $paused >/dev/null 2>&1 || true
  [ -n "${BENCH_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

echo "inputs: a ${SECS} s capture of demo-seq, a dwarf recording, a ${MB} MB perf script stream ..." >&2
"$NEW" --quiet --output-dir "$WORK/store" cpu demo-seq "${SECS}s" -F 999 --call-graph fp --fold native >/dev/null
NATIVE_DATA="$(find "$WORK/store" -name '*.data' | head -1)"
mkdir -p "$WORK/root"
docker export demo-seq | tar -x -C "$WORK/root" --wildcards 'usr/local/bin/*' 'usr/lib/*' 'lib*' 'usr/bin/*' 'root/.debug/*' 2>/dev/null || true
gcc -O2 -fomit-frame-pointer -fasynchronous-unwind-tables -o "$WORK/dwarf-loop" tests/data/native/dwarf-loop.c
perf record -q -F 999 --call-graph dwarf -o "$WORK/dwarf.data" -- "$WORK/dwarf-loop" 20 >/dev/null 2>&1
mkdir -p "$WORK/.symbols"
python3 - "$WORK/stream" "$MB" <<'PY'
import sys
chunk = open("tests/data/perf-script-demo-seq.txt", "rb").read()
if not chunk.endswith(b"\n\n"):
    chunk = chunk.rstrip(b"\n") + b"\n\n"
with open(sys.argv[1], "wb") as out:
    for _ in range(int(sys.argv[2]) * (1 << 20) // len(chunk) + 1):
        out.write(chunk)
PY

workload() { # build workload
  case "$2" in
    native) "$1" fold "$NATIVE_DATA" --symfs "$WORK/root" -o "$WORK/out.folded" ;;
    dwarf) "$1" fold "$WORK/dwarf.data" --symfs / -o "$WORK/out.folded" ;;
    fold) "$1" fold - -o "$WORK/out.folded" --svg "$WORK/out.svg" < "$WORK/stream" ;;
  esac
}
# Warm-up: the kernel's symbols kept, the files in the page cache.
for w in native dwarf fold; do workload "$NEW" "$w" >/dev/null 2>&1; workload "$OLD" "$w" >/dev/null 2>&1; done

paused="$(docker ps -q --filter status=running)"
[ -z "$paused" ] || docker pause $paused >/dev/null
sleep 2
for round in $(seq 1 "$RUNS"); do
  if [ $((round % 2)) = 1 ]; then order=(old new); else order=(new old); fi
  for w in native dwarf fold; do
    for which in "${order[@]}"; do
      bin="$OLD"; [ "$which" = new ] && bin="$NEW"
      start=$(date +%s%N)
      workload "$bin" "$w" >/dev/null 2>&1
      end=$(date +%s%N)
      echo "$(( (end - start) / 1000 ))" >>"$WORK/$w.$which"
    done
  done
done

echo "load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $RUNS runs each, builds in turns"
printf '%-8s %12s %12s %9s\n' workload "old (median)" "new (median)" "new/old"
for w in native dwarf fold; do
  o=$(sort -n "$WORK/$w.old" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  n=$(sort -n "$WORK/$w.new" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  awk -v w="$w" -v o="$o" -v n="$n" 'BEGIN { printf "%-8s %10.3f s %10.3f s %9.3f\n", w, o / 1e6, n / 1e6, n / o }'
done
