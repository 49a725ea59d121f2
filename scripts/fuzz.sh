#!/usr/bin/env bash
# Runs each cargo-fuzz target of fuzz/ for a fixed time (default 60 s each), built with
# debug assertions and overflow checks (`-a`: arithmetic on hostile numbers that would wrap
# in a release build is a crash here), and prints, per target, the runs done and whether it
# found a crash. Needs a nightly toolchain and
# cargo-fuzz (`cargo install cargo-fuzz`); not part of `cargo test` or CI (which run the
# proptest cases of tests/hostile_input.rs on stable instead).
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(perf_script perf_data heap_dump manifest tar_stream pprof folded markers elf_symbols unwind)
command -v cargo-fuzz >/dev/null || { echo "fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2; exit 1; }
# Seeds: real captures from tests/data, so the fuzzer starts from valid input.
seed() {
  local dir="fuzz/corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp -n "$f" "$dir/" ; done
}
seed perf_script tests/data/perf-script-demo-seq.txt
seed perf_data tests/data/offcpu-contextswitches.data tests/data/offcpu-iobandwidth.data
seed heap_dump tests/data/heap/demo-seq.heap
seed pprof tests/data/go/demo-go-heap.pb.gz
seed folded tests/data/cpu-demo-seq.folded
elf=tests/data/native/host-dwarf-loop.root/tmp/devprof-dwarf-golden/dwarf-loop
seed elf_symbols "$elf"
# unwind: 48 bytes of mapping and registers and 2 of stack length (all zero), then a binary.
mkdir -p fuzz/corpus/unwind fuzz/corpus/markers
[ -f fuzz/corpus/unwind/seed ] || { head -c 50 /dev/zero; cat "$elf"; } >fuzz/corpus/unwind/seed
[ -f fuzz/corpus/markers/seed ] || printf '%s\n' \
  '2024-06-10T08:00:01.234Z  INFO Block added to canonical chain number=15207178 hash=0x2ccd elapsed=2.877896ms' \
  '{"format":"devprof-markers","version":1,"clock":"unix_ns","container":"c","since_ns":0,"until_ns":9,"sets":[],"rules":[],"lines_read":1,"lines_cut":0,"dropped":0,"notes":[]}' \
  '{"time_ns":5,"name":"block","set":"reth","number":7,"line":"imported"}' >fuzz/corpus/markers/seed
failed=0
for t in "${targets[@]}"; do
  log="$(mktemp)"
  if cargo +nightly fuzz run -a "$t" -- -max_total_time="$secs" -rss_limit_mb=1024 >"$log" 2>&1; then
    runs="$(grep -o 'Done [0-9]* runs' "$log" | tail -1 || true)"
    echo "fuzz $t: ${secs} s, ${runs:-runs unknown}, no crash"
  else
    echo "fuzz $t: FAILED (see fuzz/artifacts/$t/)"; tail -n 30 "$log"
    failed=1
  fi
  rm -f "$log"
done
exit "$failed"
