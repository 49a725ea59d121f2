"""A spot check of what samply unwound: `samply import` (0.13) writes addresses only (its
server names them when the profile is opened; `import` ignores --unstable-presymbolicate,
which only `samply record` honours), so each sample's innermost user frame is named here
from its binary's symbol table with nm, and the functions samply's samples land in are
compared with those of devprof's native fold of the same perf.data.

    python3 scripts/samply_names.py PROFILE.json[.gz] NATIVE.folded [ROOT]

ROOT is where the recorded paths lead (a container's exported files; default /).
"""
import bisect
import gzip
import json
import os
import subprocess
import sys


def symbols(path):
    """Sorted (start, end, name) of the functions in an ELF file's symbol table (the
    dynamic one when it was stripped)."""
    for flags in (["--defined-only"], ["-D", "--defined-only"]):
        run = subprocess.run(["nm", "-S", "-C", *flags, path], capture_output=True, text=True)
        out = []
        for line in run.stdout.splitlines():
            parts = line.split(None, 3)  # a demangled name may hold spaces
            if len(parts) == 4 and parts[2] in "tTwWiI":
                start, size = int(parts[0], 16), int(parts[1], 16)
                out.append((start, start + size, parts[3].split("@")[0]))
        if out:
            out.sort()
            return out
    return []


def name_at(table, address):
    i = bisect.bisect_right(table, (address, float("inf"), "")) - 1
    if i >= 0 and table[i][0] <= address < table[i][1]:
        return table[i][2]
    return None


def samply_leaves(profile, root):
    """Samples by the function of their innermost user frame (kernel frames skipped)."""
    tables = {}
    counts = {}
    total = 0
    for thread in profile["threads"]:
        samples, stacks = thread["samples"], thread["stackTable"]
        frames, funcs, resources = thread["frameTable"], thread["funcTable"], thread["resourceTable"]
        for stack in samples["stack"]:
            total += 1
            name = "(no user frame)"
            while stack is not None:
                frame = stacks["frame"][stack]
                resource = funcs["resource"][frames["func"][frame]]
                lib = profile["libs"][resources["lib"][resource]] if resource is not None and resource >= 0 else None
                if lib and not lib["path"].startswith("["):
                    path = os.path.join(root, lib["path"].lstrip("/"))
                    if path not in tables:
                        tables[path] = symbols(path)
                    name = name_at(tables[path], frames["address"][frame]) or f"[{lib['name']}]"
                    break
                stack = stacks["prefix"][stack]
            counts[name] = counts.get(name, 0) + 1
    return counts, total


def native_shares(path):
    """devprof's samples and, per function, how many of them have it on their stack (for
    a function that calls no other user code, as the ones samples land in mostly are, that
    is the samples whose innermost user frame it is: the kernel frames below it aside)."""
    stacks = []
    for line in open(path):
        stack, n = line.rstrip("\n").rsplit(" ", 1)
        stacks.append((set(stack.split(";")[1:]), int(n)))
    total = sum(n for _, n in stacks)
    return (lambda name: sum(n for frames, n in stacks if name in frames)), total


def main():
    profile_path, folded, root = sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else "/")
    opener = gzip.open if profile_path.endswith(".gz") else open
    profile = json.load(opener(profile_path))
    samply, total = samply_leaves(profile, root)
    native, native_total = native_shares(folded)
    top = sorted(samply.items(), key=lambda kv: -kv[1])[:8]
    print(f"samply: {total} samples; its innermost user frames, named with nm:")
    for name, n in top:
        mine = native(name)
        print(f"  {100.0 * n / total:5.1f}%  {name}   (devprof's native fold: "
              f"{100.0 * mine / max(native_total, 1):.1f}% of {native_total} samples)")


if __name__ == "__main__":
    main()
