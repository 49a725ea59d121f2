"""Two folded files of one recording compared: the bench scripts' shared arithmetic.

`compare(work)` reads WORK/native.folded and WORK/script.folded (devprof's native fold
and perf script's text folded), prints the sample totals and the share of perf script's
samples whose whole stack the native fold has too, and returns both as dicts.
"""
import os


def load(path):
    out = {}
    for line in open(path):
        stack, n = line.rstrip("\n").rsplit(" ", 1)
        out[stack] = out.get(stack, 0) + int(n)
    return out


def identical(native, script, keep=lambda stack: True):
    """perf script's samples (of stacks `keep` accepts) and how many of them the native
    fold put on the very same stack."""
    total = sum(n for s, n in script.items() if keep(s))
    same = sum(min(n, native.get(s, 0)) for s, n in script.items() if keep(s))
    return total, same


def compare(work):
    native = load(os.path.join(work, "native.folded"))
    script = load(os.path.join(work, "script.folded"))
    total, same = identical(native, script)
    print(f"samples: native {sum(native.values())}, perf script {total}; "
          f"identical stacks {same} ({100.0 * same / max(total, 1):.2f}%)")
    return native, script
