#!/usr/bin/env python3
"""The figures the golden heap test expects, computed from demo-seq.heap and the nm/readelf
symbol tables alone (not by devprof): jeprof's unbiasing formula applied once per stack,
and which stacks pass through a function (an address, minus 1, inside its nm extent).

    python3 tests/data/heap/expected.py
"""
import math, os

HERE = os.path.dirname(os.path.abspath(__file__))

def load_dump(path):
    period, header, stacks, maps = None, None, [], []
    cur, inside = None, False
    for line in open(path):
        if period is None:
            period = int(line.split('/')[1]); continue
        if line.startswith('MAPPED_LIBRARIES:'):
            inside = True; continue
        if inside:
            if line.strip():
                f = line.split(None, 5)
                s, e = (int(x, 16) for x in f[0].split('-'))
                maps.append((s, e, int(f[2], 16), f[5].strip() if len(f) > 5 else ''))
            continue
        t = line.strip()
        if t.startswith('@'):
            cur = [int(a, 16) for a in t.split()[1:]]
        elif t.startswith('t*:'):
            a, b = t[3:].split('[')
            cur_o, cur_b = (int(x) for x in a.split(':'))
            acc_o, acc_b = (int(x) for x in b.rstrip(']').split(':'))
            if cur is None and header is None:
                header = (cur_o, cur_b, acc_o, acc_b)
            elif cur is not None:
                stacks.append((cur, (cur_o, cur_b, acc_o, acc_b)))
                cur = None
    return period, header, stacks, maps

def unbias(objs, nbytes, period):
    if objs == 0 or nbytes == 0:
        return 0.0
    return nbytes / (1 - math.exp(-(nbytes / objs) / period))

def table(path):
    segs, syms = [], []
    for line in open(path):
        f = line.split()
        if f and f[0] == 'segment':
            segs.append(tuple(int(x, 16) for x in f[1:4]))
        elif f and f[0] == 'symbol':
            syms.append((int(f[1], 16), int(f[2], 16), f[3]))
    return segs, syms

period, header, stacks, maps = load_dump(os.path.join(HERE, 'demo-seq.heap'))
segs, syms = table(os.path.join(HERE, 'demo-node.symbols'))

def in_function(addr, fragment):
    a = addr - 1
    for s, e, off, p in maps:
        if s <= a < e and p == '/usr/local/bin/demo-node':
            fo = a - s + off
            for so, sz, va in segs:
                if so <= fo < so + sz:
                    v = fo - so + va
                    return any(sa <= v < sa + ss and fragment in n for sa, ss, n in syms)
    return False

for label, (oi, bi) in [('in-use', (0, 1)), ('allocated', (2, 3))]:
    per_stack = [(addrs, round(unbias(c[oi], c[bi], period))) for addrs, c in stacks]
    total = sum(b for _, b in per_stack)
    nonzero = sum(1 for _, b in per_stack if b > 0)
    hdr = round(unbias(header[oi], header[bi], period))
    print(f'{label}: stacks {nonzero}, total {total}, header {hdr}')
    for fn in ['12alloc_blocks', '12state_lookup']:
        inc = sum(b for addrs, b in per_stack if any(in_function(a, fn) for a in addrs))
        print(f'{label}: {fn[2:]} inclusive {inc}')
