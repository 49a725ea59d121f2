#!/usr/bin/env bash
# Benchmark (not a test; prints figures, asserts nothing): the native fold of a perf.data
# (read and symbolized by devprof) against `perf script | devprof fold -`, on the same file:
# a SECONDS-long (default 60) 999 Hz frame-pointer capture of demo-seq made by devprof.
# Both run on this host against a copy of the container's files (--symfs), each RUNS times
# (default 5), timed by the shell's clock (wall) and /usr/bin/time -v (CPU time, peak RSS
# of the largest process). The sample totals of both folds are printed, with the share of
# samples whose stacks agree. perf script also runs with kallsyms from a plain file (a copy
# made once), and the native fold once without the kernel symbols kept for the boot (the
# first fold of a boot reads /proc/kallsyms).
#
#   scripts/bench-native.sh [SECONDS] [RUNS]
# Environment: BENCH_TARGET (default demo-seq), BENCH_DATA (an existing perf.data to use
# instead of capturing; its container's files must still be those of BENCH_TARGET),
# BENCH_SYMFS (where the recorded files are, instead of a copy of BENCH_TARGET's: `/` for a
# perf.data recorded on this host).
set -euo pipefail
[ -n "${EPOCHREALTIME:-}" ] || { echo "bench-native: needs bash 5 or later (EPOCHREALTIME)" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_="${1:-60}"; RUNS="${2:-5}"
TARGET="${BENCH_TARGET:-demo-seq}"
BIN="${DEVPROF_BIN:-$(pwd)/target/release/devprof}"
[ -x "$BIN" ] || cargo build --release --locked -q -p devprof
WORK="$(mktemp -d /tmp/devprof-bench-native.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

DATA="${BENCH_DATA:-}"
if [ -z "$DATA" ]; then
  echo "capturing $SECONDS_ s of $TARGET at 999 Hz (fp) ..." >&2
  "$BIN" --output-dir "$WORK/store" cpu "$TARGET" "${SECONDS_}s" -F 999 --call-graph fp --fold native --json > "$WORK/capture.json"
  DATA="$(find "$WORK/store" -name '*.data' | head -1)"
fi
ROOT="${BENCH_SYMFS:-$WORK/root}"
if [ -z "${BENCH_SYMFS:-}" ]; then
  echo "copying the files of $TARGET the stacks point into ..." >&2
  mkdir -p "$ROOT"
  # root/.debug: an export stores a binary perf once cached there (a hard link) as a link
  # to the cached copy, which must come out too.
  docker export "$TARGET" | tar -x -C "$ROOT" --wildcards 'usr/local/bin/*' 'usr/lib/*' 'lib*' 'usr/bin/*' 'root/.debug/*' 2>/dev/null || true
  for f in usr/local/bin usr/lib/x86_64-linux-gnu/libc.so.6; do
    [ -e "$ROOT/$f" ] || echo "bench-native: warning: $f did not come out of $TARGET's export" >&2
  done
fi

measure() { # name, command... -> "wall_s peak_mb cpu_s"
  # Wall time from the shell's microsecond clock: /usr/bin/time gives it in hundredths,
  # too coarse for a run of a tenth of a second. RSS and CPU time come from /usr/bin/time.
  local name="$1" t0 t1; shift
  t0="${EPOCHREALTIME/,/.}"
  /usr/bin/time -v -o "$WORK/$name.time" "$@" > /dev/null 2> "$WORK/$name.err"
  t1="${EPOCHREALTIME/,/.}"
  awk -F': ' -v wall="$(python3 -c "print(${t1} - ${t0})")" \
     '/Maximum resident set size/ { rss = $2 / 1024 }
      /User time|System time/ { cpu += $2 }
      END { printf "%.3f %.1f %.2f\n", wall, rss, cpu }' "$WORK/$name.time"
}

SCRIPT=(perf script -i "$DATA" --symfs "$ROOT" --kallsyms /proc/kallsyms -F comm,pid,tid,time,event,ip,sym,dso --no-inline)
cat > "$WORK/script.sh" <<SH
set -o pipefail
${SCRIPT[*]} 2>/dev/null | "$BIN" fold - -o "$WORK/script.folded"
SH
# perf script given kallsyms as a plain file: perf without the kernel's formatting of it,
# the fairest reference for the native fold with its kept copy.
cat /proc/kallsyms > "$WORK/kallsyms"
cat > "$WORK/script-file.sh" <<SH
set -o pipefail
${SCRIPT[*]/\/proc\/kallsyms/$WORK/kallsyms} 2>/dev/null | "$BIN" fold - -o "$WORK/script-file.folded"
SH
echo "perf.data: $(du -h "$DATA" | cut -f1), load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
printf '%-34s %8s %9s %8s\n' "run" "wall s" "peak MB" "cpu s"
# A capture in the store has its container's kernel symbols kept for the boot (in its
# symbol cache, .symbols/kernel-BOOT); the first fold of a boot reads /proc/kallsyms.
KEPT="$(dirname "$DATA")/.symbols"
if [ -d "$KEPT" ]; then
  rm -rf "$KEPT"/kernel-*
  read -r w r c < <(measure "native-cold" "$BIN" fold "$DATA" --symfs "$ROOT" -o "$WORK/native.folded")
  printf '%-34s %8s %9s %8s\n' "native, first of the boot" "$w" "$r" "$c"
  echo "$w $r $c" > "$WORK/native-cold.run"
else
  echo "($DATA is not in a store: every native fold reads /proc/kallsyms)"
fi
for i in $(seq "$RUNS"); do
  read -r w r c < <(measure "native$i" "$BIN" fold "$DATA" --symfs "$ROOT" -o "$WORK/native.folded")
  printf '%-34s %8s %9s %8s\n' "native #$i" "$w" "$r" "$c"; echo "$w $r $c" >> "$WORK/native.runs"
  read -r w r c < <(measure "script$i" bash "$WORK/script.sh")
  printf '%-34s %8s %9s %8s\n' "perf script | fold #$i" "$w" "$r" "$c"; echo "$w $r $c" >> "$WORK/script.runs"
  read -r w r c < <(measure "script-file$i" bash "$WORK/script-file.sh")
  printf '%-34s %8s %9s %8s\n' "perf script (kallsyms file) #$i" "$w" "$r" "$c"; echo "$w $r $c" >> "$WORK/script-file.runs"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/native.runs" "$WORK/script.runs" "$WORK/native.folded" "$WORK/script.folded" "$WORK/script-file.runs" "$WORK/native-cold.run" <<'PY'
import os, statistics, sys
def runs(p):
    rows = [tuple(map(float, l.split())) for l in open(p) if l.strip()]
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
(nw, nr, nc), (sw, sr, sc), (fw, fr, fc) = runs(sys.argv[1]), runs(sys.argv[2]), runs(sys.argv[5])
med = statistics.median
print(f"native                    wall median {med(nw):.3f} s (min {min(nw):.3f}, max {max(nw):.3f}), cpu median {med(nc):.2f} s, peak {max(nr):.0f} MB")
if os.path.exists(sys.argv[6]):
    (cw,), (cr,), (cc,) = runs(sys.argv[6])
    print(f"native, first of the boot wall {cw:.3f} s, cpu {cc:.2f} s, peak {cr:.0f} MB")
print(f"perf script               wall median {med(sw):.3f} s (min {min(sw):.3f}, max {max(sw):.3f}), cpu median {med(sc):.2f} s, peak {max(sr):.0f} MB")
print(f"perf script, kallsyms file wall median {med(fw):.3f} s (min {min(fw):.3f}, max {max(fw):.3f}), cpu median {med(fc):.2f} s, peak {max(fr):.0f} MB")
print(f"native is {med(sw) / med(nw):.1f}x faster in wall time (median; {min(sw) / max(nw):.1f}x to {max(sw) / min(nw):.1f}x over the runs), {med(sc) / med(nc):.1f}x in CPU time")
print(f"native is {med(fw) / med(nw):.1f}x faster than perf script with kallsyms from a file (wall, median)")
if os.path.exists(sys.argv[6]):
    print(f"the first native fold of a boot is {med(sw) / cw:.1f}x faster than perf script (wall)")
sys.path.insert(0, "scripts")
from folded_compare import load
a, b = load(sys.argv[3]), load(sys.argv[4])
ta, tb = sum(a.values()), sum(b.values())
same = sum(min(n, a.get(s, 0)) for s, n in b.items())
print(f"samples: native {ta}, perf script {tb}; identical stacks for {100 * same / max(tb, 1):.1f}% of perf script's samples")
PY
