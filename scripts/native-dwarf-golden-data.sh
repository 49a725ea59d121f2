#!/usr/bin/env bash
# Makes the DWARF golden capture tests/data/native/host-dwarf-loop.*: builds the small
# program tests/data/native/dwarf-loop.c (static musl, no frame pointers, unwind tables and
# their search table), records it on this host with `--call-graph dwarf,4096` (perf's
# user-stack copies compress well: -z keeps the file small), and hands the perf.data to
# scripts/native-golden-data.sh with the recorded binary kept as a --symfs tree.
#
#   scripts/native-dwarf-golden-data.sh [SECONDS] [HZ]      (defaults: 3 s at 199 Hz)
# Needs musl-gcc (Debian: musl-tools) and perf.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds="${1:-3}"; hz="${2:-199}"
# A fixed path: the perf.data names it, and the symfs tree repeats it.
build=/tmp/devprof-dwarf-golden
rm -rf "$build"; mkdir -p "$build"
trap 'rm -rf "$build"' EXIT
musl-gcc -static -O2 -fomit-frame-pointer -fasynchronous-unwind-tables -Wl,--eh-frame-hdr \
    -o "$build/dwarf-loop" tests/data/native/dwarf-loop.c
perf record -q -z -F "$hz" --call-graph dwarf,4096 -o "$build/dwarf.data" -- "$build/dwarf-loop" "$seconds"
NATIVE_GOLDEN_KEEP_ROOT=1 scripts/native-golden-data.sh "$build/dwarf.data" host-dwarf-loop /
