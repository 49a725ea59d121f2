#!/usr/bin/env bash
# Makes golden data for the native CPU fold from a real perf.data: perf's own `perf script`
# of the file (the reference), the symbol tables of every file its stacks point into, and
# the kallsyms lines its kernel frames need, so the test needs no binaries and no kernel.
#
#   scripts/native-golden-data.sh PERF_DATA NAME [ROOT] [KALLSYMS]
#
# ROOT is where the recorded files are found (`/` for a capture of this host, a copy of a
# container's files otherwise); KALLSYMS defaults to /proc/kallsyms (the same kernel).
# Writes tests/data/native/NAME.data, NAME.script, NAME.modules and NAME.kallsyms; with
# NATIVE_GOLDEN_KEEP_ROOT=1 also NAME.root/, the recorded files themselves (a --symfs tree:
# unwinding DWARF call graphs needs the binaries, not only their symbol tables).
set -euo pipefail
data="$1"; name="$2"; root="${3:-/}"; kallsyms="${4:-/proc/kallsyms}"
out="$(cd "$(dirname "$0")/.." && pwd)/tests/data/native"
mkdir -p "$out"
cp "$data" "$out/$name.data"
# perf is given the recorded files alone (no /usr/lib/debug, no build-id cache): what it
# finds in a container, and what the tables below hold.
bare="$(mktemp -d)"; trap 'rm -rf "$bare"' EXIT
perf script -i "$data" -F ip,dso 2>/dev/null | grep -o '([^()]*)$' | tr -d '()' | grep '^/' | sort -u | while read -r path; do
    [ -f "$root/$path" ] && mkdir -p "$bare/root$(dirname "$path")" && cp "$root/$path" "$bare/root$path"
done
if [ "${NATIVE_GOLDEN_KEEP_ROOT:-0}" = 1 ]; then
    rm -rf "$out/$name.root"
    cp -r "$bare/root" "$out/$name.root"
fi
HOME="$bare" perf script -i "$data" --symfs "$bare/root" --kallsyms "$kallsyms" -F comm,pid,tid,time,event,ip,sym,dso --no-inline \
    > "$out/$name.script" 2>/dev/null

# One table per file: `module <path>`, then its loadable segments and text symbols (the
# format `ModuleSymbols::from_table` reads), as readelf -l and nm print them.
: > "$out/$name.modules"
grep -o '([^()]*)$' "$out/$name.script" | tr -d '()' | grep '^/' | sort -u | while read -r path; do
    file="$root/$path"
    [ -f "$file" ] || continue
    echo "module $path" >> "$out/$name.modules"
    readelf -lW "$file" | awk '$1 == "LOAD" { gsub(/0x/, ""); print "segment", $2, $5, $3 }' \
        >> "$out/$name.modules"
    syms="$(nm -S --defined-only "$file" 2>/dev/null || true)"
    [ -n "$syms" ] || syms="$(nm -D -S --defined-only "$file" 2>/dev/null || true)"
    printf '%s\n' "$syms" | awk 'NF == 4 && $3 ~ /^[tTwWi]$/ { printf "symbol %s %s %s\n", $1, $2, $4 }
                                 NF == 3 && $2 ~ /^[tTwWi]$/ { printf "symbol %s 0 %s\n", $1, $3 }' \
        | sed 's/@.*//' >> "$out/$name.modules"
done

# The kernel symbols at or below each kernel address, and the one after (where it ends).
grep -o '^\s*ffff[0-9a-f]* ' "$out/$name.script" | tr -d ' \t' | sort -u > "$out/.addresses"
awk '$2 ~ /^[tTwW]$/ && $1 != "0000000000000000"' "$kallsyms" | sort > "$out/.kallsyms"
python3 - "$out/.addresses" "$out/.kallsyms" > "$out/$name.kallsyms" <<'PY'
import bisect, sys
addrs = sorted(int(a, 16) for a in open(sys.argv[1]).read().split())
lines = [l.rstrip("\n") for l in open(sys.argv[2])]
starts = [int(l.split()[0], 16) for l in lines]
keep = set()
for a in addrs:
    i = bisect.bisect_right(starts, a) - 1
    if i >= 0:
        keep.update({i, i + 1})
for i in sorted(keep):
    if i < len(lines):
        print(lines[i])
PY
rm -f "$out/.addresses" "$out/.kallsyms"
ls -la "$out/$name".*
