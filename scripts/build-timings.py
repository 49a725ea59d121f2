#!/usr/bin/env python3
"""The units that dominate a build, from the HTML report of `cargo build --timings`
(or `cargo install --timings`): wall time, CPU-seconds summed over units, and the N
longest units. Figures only.

    scripts/build-timings.py [REPORT.html] [N]   (default: the newest in target/cargo-timings, 10)
"""
import glob, json, os, re, sys

report = sys.argv[1] if len(sys.argv) > 1 else max(
    glob.glob("target/cargo-timings/cargo-timing-*.html"), key=os.path.getmtime)
top = int(sys.argv[2]) if len(sys.argv) > 2 else 10
html = open(report).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1))
wall = max(u["start"] + u["duration"] for u in units)
print(f"{os.path.basename(report)}: {len(units)} units, wall {wall:.1f} s, "
      f"units' sum {sum(u['duration'] for u in units):.1f} s")
for u in sorted(units, key=lambda u: -u["duration"])[:top]:
    target = u.get("target", "").strip() or "lib"
    print(f"  {u['name']:26} {target:20} {u['duration']:6.1f} s  (from {u['start']:.0f} s)")
