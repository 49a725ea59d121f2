#!/usr/bin/env bash
# Takes down what scripts/podman-up.sh brought up: Podman's demo containers and the
# rootful service on /run/devprof-podman/podman.sock. Images stay in Podman's storage
# (the next podman-up needs not load them again); dockerd is not touched.
set -euo pipefail
RUN_DIR=/run/devprof-podman
read -r -a NAMES <<<"${DEVPROF_PODMAN_NAMES:-pod-demo-seq pod-demo-rpc}"
PODMAN=(podman --cgroup-manager=cgroupfs --events-backend=file --runtime runc)
command -v podman >/dev/null || exit 0
for name in "${NAMES[@]}"; do
  "${PODMAN[@]}" rm -f -t 2 "$name" >/dev/null 2>&1 || true
done
if [ -f "$RUN_DIR/service.pid" ]; then
  pid=$(cat "$RUN_DIR/service.pid")
  # Only the service this script's partner started (its pid and its command line).
  if grep -q "system" "/proc/$pid/cmdline" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$RUN_DIR/service.pid"
fi
rm -f "$RUN_DIR/podman.sock"
echo "podman-down: done"
