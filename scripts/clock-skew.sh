#!/usr/bin/env bash
# Shows that a session over two endpoints measures a known clock skew: Docker's demo-seq
# and, on Podman (scripts/podman-up.sh), a demo node whose clock readings run under
# libfaketime DEVPROF_SKEW ahead (default +5s). Both endpoints share this host's clock, so
# the only offset there is the injected one; the session's measured offset must equal it
# within the stated uncertainty, and the captures' first and last samples, on this host's
# clock, must lie within 250 ms of each other (each container is told its instants on its
# own clock). Prints the figures; exits non-zero when either fails.
#
# Environment: DEVPROF_SKEW (faketime's offset, e.g. +5s, -2.5s; default +5s),
# DEVPROF_DEMO_IMAGE, DEVPROF (the devprof binary; default target/debug/devprof).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
SKEW="${DEVPROF_SKEW:-+5s}"
DEMO_IMAGE="${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}"
DEVPROF="${DEVPROF:-$ROOT/target/debug/devprof}"
SOCKET=unix:///run/devprof-podman/podman.sock
CONTEXT=devprof-podman
NAME=pod-demo-skew
LIB=/usr/lib/x86_64-linux-gnu/faketime
PODMAN=(podman --cgroup-manager=cgroupfs --events-backend=file --runtime runc)

die() { echo "clock-skew: error: $*" >&2; exit 1; }
[ -x "$DEVPROF" ] || die "no $DEVPROF (cargo build)"
scripts/podman-up.sh >/dev/null
[ -f "$LIB/libfaketime.so.1" ] || die "libfaketime is not installed (apt-get install faketime)"
docker context inspect "$CONTEXT" >/dev/null 2>&1 \
  || docker context create "$CONTEXT" --docker "host=$SOCKET" >/dev/null

# A demo node whose every process (the exec of `date` too) reads a clock SKEW off.
"${PODMAN[@]}" rm -f "$NAME" >/dev/null 2>&1 || true
trap '"${PODMAN[@]}" rm -f -t 1 "$NAME" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
WORK=$(mktemp -d /tmp/devprof-clock-skew.XXXXXX)
"${PODMAN[@]}" run -d --name "$NAME" --init --network none \
  --cap-add SYS_ADMIN --cap-add SYS_PTRACE --cap-add SYSLOG --security-opt seccomp=unconfined \
  --ulimit nofile=16384:16384 --ulimit nproc=16384:16384 \
  -v "$LIB:/opt/faketime:ro" -e LD_PRELOAD=/opt/faketime/libfaketime.so.1 -e "FAKETIME=$SKEW" \
  -e DEMO_WORKLOADS=hash_chain:20 "$DEMO_IMAGE" >/dev/null
sleep 1
echo "host: $(date +%s%N)  $NAME: $("${PODMAN[@]}" exec "$NAME" date +%s%N)  (faketime $SKEW)"

cd "$WORK"
docker inspect -f '{{.State.Running}}' demo-seq >/dev/null || die "Docker's demo-seq is not running"
"$DEVPROF" profile demo-seq "$NAME@$CONTEXT" 3 | tee "$WORK/summary.txt" || echo "clock-skew: some captures failed (above); the clocks are measured regardless"
manifest=$(ls profiling/sessions/session-*.json | head -1)
python3 - "$manifest" "$SKEW" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
skew_ms = float(sys.argv[2].rstrip("s")) * 1000
ok = True
for e in record["endpoints"]:
    expected = skew_ms if e["context"] != "default" else 0.0
    for when in ("clock_before", "clock_after"):
        c = e[when]
        if c is None:
            print(f"{e['context']} {when}: not measured"); ok = False; continue
        agrees = abs(c["offset_ms"] - expected) <= c["uncertainty_ms"]
        ok &= agrees
        print(f"{e['context']:16} {when:12} offset {c['offset_ms']:+9.2f} ms ± {c['uncertainty_ms']:.2f} ms"
              f"  expected {expected:+.0f} ms: {'agrees' if agrees else 'DISAGREES'}")
starts = [c["window_started_at"] for c in record["captures"]]
print("window starts (host clock):", ", ".join(s or "-" for s in starts))
alignment = record.get("alignment") or {}
for span in alignment.get("captures", []):
    print(f"  {span.get('container')}: first sample {span.get('first_at')}, last {span.get('last_at')} ({span.get('source')})")
first, last = alignment.get("first_sample_spread_ms"), alignment.get("last_sample_spread_ms")
print("first samples within", first, "ms, last samples within", last, "ms, on this host's clock")
if first is None or last is None or max(first, last) > 250:
    print("the captures' samples are not within 250 ms of each other"); ok = False
sys.exit(0 if ok else 1)
PY
