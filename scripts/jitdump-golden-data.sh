#!/usr/bin/env bash
# Makes tests/data/jit: a real jitdump of node (V8's --perf-prof) cut to a few records, and
# the perf map V8 wrote for the same code at the same time (--perf-basic-prof), the
# reference the jitdump's names are checked against. Needs the demo-js image
# (scripts/runtime-images.sh). The cut keeps whole records: the first code loads, every
# record of the function `fib`, and a few debug and unwinding records for the reader to
# skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=tests/data/jit
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
chmod 777 "$scratch"
docker run --rm --ulimit nofile=16384:16384 -v "$scratch:/out" --entrypoint sh devprof-demo-js:latest -c \
  'cd /tmp && node --perf-prof --perf-basic-prof -e "function fib(n){return n<2?n:fib(n-1)+fib(n-2)}; let s=0; for (let i=0;i<30;i++) s+=fib(20); console.log(s)" >/dev/null && cp /tmp/jit-*.dump /tmp/perf-*.map /out/'
mkdir -p "$out"
python3 - "$scratch" "$out" <<'PY'
import glob, struct, sys
scratch, out = sys.argv[1], sys.argv[2]
dump = open(glob.glob(scratch + "/jit-*.dump")[0], "rb").read()
perf_map = open(glob.glob(scratch + "/perf-*.map")[0]).read().splitlines()
header = struct.unpack_from("<I", dump, 8)[0]
at, kept, loads, others = header, [], 0, {2: 0, 4: 0}
addresses = set()
while at + 16 <= len(dump):
    rid, size = struct.unpack_from("<II", dump, at)
    if size < 16 or at + size > len(dump):
        break
    record = dump[at:at + size]
    take = False
    if rid == 0:
        body = record[16:]
        address, code_size = struct.unpack_from("<QQ", body, 16)
        name = body[40:body.index(b"\0", 40)].decode()
        if loads < 40 or "fib" in name:
            take, loads = True, loads + 1
            addresses.add(address)
    elif rid in others and others[rid] < 3:
        take, others[rid] = True, others[rid] + 1
    if take:
        kept.append(record)
    at += size
open(out + "/node-fib.jitdump", "wb").write(dump[:header] + b"".join(kept))
lines = [l for l in perf_map if int(l.split(" ")[0], 16) in addresses]
open(out + "/node-fib.perf-map", "w").write("\n".join(lines) + "\n")
print(f"{len(kept)} records ({loads} code loads), {len(lines)} perf map lines")
PY
ls -la "$out"
