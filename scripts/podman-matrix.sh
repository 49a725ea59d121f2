#!/usr/bin/env bash
# The cpu, heap, offcpu and sidecar tests (tests/{cpu,heap,offcpu,sidecar}.rs) run against
# Podman's Docker-compatible API instead of dockerd: DOCKER_HOST names Podman's socket for
# devprof and for the docker CLI the tests use, and Podman runs a demo node named demo-seq
# (Podman's own namespace of names: dockerd's demo-seq is not touched). Prints each test's
# result and a count. Slow (minutes); CI runs the four tests of tests/podman.rs instead.
#
# Environment: DEVPROF_MATRIX_TESTS (test files, default "cpu heap offcpu sidecar"),
# DEVPROF_DEMO_PLAIN_IMAGE (the sidecar tests' image, default devprof-demo-plain:latest).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SOCKET=unix:///run/devprof-podman/podman.sock
read -r -a TESTS <<<"${DEVPROF_MATRIX_TESTS:-cpu heap offcpu sidecar}"
PLAIN="${DEVPROF_DEMO_PLAIN_IMAGE:-devprof-demo-plain:latest}"
PODMAN=(podman --cgroup-manager=cgroupfs --events-backend=file --runtime runc)

scripts/podman-up.sh || exit 1
DEVPROF_PODMAN_NAMES=demo-seq scripts/podman-up.sh || exit 1
if docker image inspect "$PLAIN" >/dev/null 2>&1 && ! "${PODMAN[@]}" image exists "$PLAIN"; then
  docker save "$PLAIN" | "${PODMAN[@]}" load -q >/dev/null
fi
trap '"${PODMAN[@]}" rm -f -t 2 demo-seq >/dev/null 2>&1' EXIT

args=()
for t in "${TESTS[@]}"; do args+=(--test "$t"); done
log=$(mktemp /tmp/devprof-podman-matrix.XXXXXX)
DOCKER_HOST="$SOCKET" cargo test --locked "${args[@]}" -- --include-ignored --test-threads=1 2>&1 | tee "$log" \
  | grep -E "^test .* \.\.\. " || true
echo
echo "against Podman: $(grep -cE '^test .* \.\.\. ok$' "$log") passed, $(grep -cE '^test .* \.\.\. FAILED$' "$log") failed"
grep -E "^    [a-z_]+$" "$log" | sed 's/^ */  failed: /' || true
rm -f "$log"
