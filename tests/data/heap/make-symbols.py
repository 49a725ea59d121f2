#!/usr/bin/env python3
"""Makes the symbol tables of the golden heap test from the real binaries, with binutils
(readelf, nm), not with devprof: for every address of demo-seq.heap (minus 1: return
addresses) in a file mapping, the symbol containing it (by nm's address and size), plus
the symbols just before and after it, and the file's PT_LOAD segments.

    python3 make-symbols.py DUMP PATH-IN-DUMP=LOCAL-ELF OUT [...]
e.g.
    python3 make-symbols.py demo-seq.heap \
        /usr/local/bin/demo-node=profiling/demo-seq/.symbols/<key>/demo-node demo-node.symbols \
        /usr/lib/x86_64-linux-gnu/libc.so.6=profiling/demo-seq/.symbols/<key>/libc.so.6 libc.so.6.symbols
"""
import subprocess, sys

def mappings(dump):
    maps, inside = [], False
    for line in open(dump):
        if line.startswith('MAPPED_LIBRARIES:'):
            inside = True
            continue
        if inside and line.strip():
            f = line.split(None, 5)
            s, e = (int(x, 16) for x in f[0].split('-'))
            maps.append((s, e, int(f[2], 16), f[5].strip() if len(f) > 5 else ''))
    return maps

def addresses(dump):
    out = set()
    for line in open(dump):
        if line.startswith('@'):
            out.update(int(a, 16) for a in line.split()[1:])
    return out

def segments(elf):
    segs = []
    for line in subprocess.run(['readelf', '-lW', elf], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == 'LOAD' and int(f[4], 16) > 0:
            segs.append((int(f[1], 16), int(f[4], 16), int(f[2], 16)))
    return segs

def symbols(elf):
    def nm(extra):
        syms = []
        r = subprocess.run(['nm', '-S', '--defined-only'] + extra + [elf], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            f = line.split(None, 3)
            if len(f) == 4 and f[2] in 'tTwWiI':
                syms.append((int(f[0], 16), int(f[1], 16), f[3]))
        return syms
    return sorted(set(nm([]) or nm(['-D'])))

dump = sys.argv[1]
maps, addrs = mappings(dump), addresses(dump)
args = sys.argv[2:]
for i in range(0, len(args), 2):
    path, elf = args[i].split('=', 1)
    out = args[i + 1]
    segs, syms = segments(elf), symbols(elf)
    keep = set()
    for a in addrs:
        a -= 1
        for s, e, off, p in maps:
            if s <= a < e and p == path:
                fo = a - s + off
                for so, sz, va in segs:
                    if so <= fo < so + sz:
                        v = fo - so + va
                        for j, (sa, ss, _) in enumerate(syms):
                            if sa <= v < sa + ss:
                                keep.update(range(max(0, j - 1), min(len(syms), j + 2)))
    with open(out, 'w') as f:
        f.write(f'# {path}: PT_LOAD segments (readelf -lW) and the symbols around the dump\'s addresses (nm -S)\n')
        for so, sz, va in segs:
            f.write(f'segment {so:x} {sz:x} {va:x}\n')
        for j in sorted(keep):
            sa, ss, name = syms[j]
            f.write(f'symbol {sa:x} {ss:x} {name.split("@")[0]}\n')
