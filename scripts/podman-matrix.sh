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
# The images the tests start containers from, where Podman lacks them.
images=("$PLAIN" "${DEVPROF_BASE_IMAGE:-debian:bookworm-slim}")
# The build tests build from Rust's image.
[[ " ${TESTS[*]} " == *" build "* ]] && images+=("${DEVPROF_RUST_IMAGE:-rust:1-slim-bookworm}")
for image in "${images[@]}"; do
  if docker image inspect "$image" >/dev/null 2>&1 && ! "${PODMAN[@]}" image exists "$image"; then
    docker save "$image" | "${PODMAN[@]}" load -q >/dev/null
  fi
done
trap '"${PODMAN[@]}" rm -f -t 2 demo-seq >/dev/null 2>&1' EXIT

args=()
for t in "${TESTS[@]}"; do args+=(--test "$t"); done
log=$(mktemp /tmp/devprof-podman-matrix.XXXXXX)
DOCKER_HOST="$SOCKET" cargo test --locked --no-fail-fast "${args[@]}" -- --include-ignored --test-threads=1 2>&1 | tee "$log" \
  | grep -E "^test .* \.\.\. " || true
echo
echo "against Podman: $(grep -cE '^test .* \.\.\. ok$' "$log") passed, $(grep -cE '^test .* \.\.\. FAILED$' "$log") failed"
# Each failure with the line after its panic (what it found).
grep -A1 -E "^thread '.*' .*panicked at" "$log" | grep -vE "^(--|stack backtrace:)$" \
  | sed -E "s/^thread '([a-z0-9_]+)'.*/  failed: \1/; s/^([^ ])/    \1/" || true
echo "the whole log: $log"
