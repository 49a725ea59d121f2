#!/usr/bin/env bash
# Brings a second container endpoint up beside dockerd: Debian's Podman, rootful, serving
# its Docker-compatible API on a private socket, with demo containers on it.
#   1. installs podman and faketime from Debian (apt) when missing,
#   2. starts `podman system service` on unix:///run/devprof-podman/podman.sock (once;
#      its pid in /run/devprof-podman/service.pid),
#   3. copies the demo image and the profiler image of sidecars from Docker's storage into
#      Podman's (`docker save | podman load`), when Podman lacks them or has older ones,
#   4. starts the demo containers (pod-demo-seq, pod-demo-rpc) with the rights the demo
#      devnet gives its nodes (compose/demo.yml) and podman-compose's labels, then waits
#      until their node runs.
# Idempotent. Podman's containers have no network (--network none): no bridge, no
# firewall rules, nothing that could touch dockerd's networks or ports.
#
# Environment: DEVPROF_DEMO_IMAGE (default devprof-demo-node:latest),
# DEVPROF_PROFILER_IMAGE (default devprof-profiler:latest), DEVPROF_BIN (a devprof that
# trusts the profiler image on Podman's endpoint), DEVPROF_PODMAN_NAMES (the
# container names, default "pod-demo-seq pod-demo-rpc").
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUN_DIR=/run/devprof-podman
SOCKET="$RUN_DIR/podman.sock"
DEMO_IMAGE="${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}"
PROFILER_IMAGE="${DEVPROF_PROFILER_IMAGE:-devprof-profiler:latest}"
read -r -a NAMES <<<"${DEVPROF_PODMAN_NAMES:-pod-demo-seq pod-demo-rpc}"
PROJECT=devprof-podman
# Global options of every podman call: no systemd on this machine, and runc (crun 1.8
# refuses the hybrid cgroup layout dockerd runs with here).
PODMAN=(podman --cgroup-manager=cgroupfs --events-backend=file --runtime runc)

say() { echo "podman-up: $*"; }
die() { echo "podman-up: error: $*" >&2; exit 1; }
started=$(date +%s.%N)

[ "$(id -u)" = 0 ] || die "the rootful service needs root (rootless: see docs/podman.md)"

# 1. Packages.
if ! command -v podman >/dev/null || ! command -v faketime >/dev/null || [ ! -x /usr/libexec/podman/catatonit ]; then
  say "installing podman and faketime (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends podman faketime catatonit uidmap slirp4netns crun >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends podman faketime catatonit uidmap slirp4netns crun >/dev/null; } \
    || die "apt-get could not install podman"
fi

# 2. The service.
answers() { curl -sf --max-time 2 --unix-socket "$SOCKET" http://d/_ping >/dev/null 2>&1; }
mkdir -p "$RUN_DIR"
chmod 700 "$RUN_DIR"
if ! answers; then
  say "starting podman system service on $SOCKET"
  rm -f "$SOCKET"
  nohup "${PODMAN[@]}" system service --time=0 "unix://$SOCKET" >"$RUN_DIR/service.log" 2>&1 &
  echo $! >"$RUN_DIR/service.pid"
  for _ in $(seq 1 100); do answers && break; sleep 0.1; done
  answers || die "the service did not answer; see $RUN_DIR/service.log"
fi

# 3. Images: Podman keeps the image id of what it loads, so equal ids mean nothing to copy.
copy_image() {
  local image=$1 docker_id podman_id
  docker_id=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null) \
    || die "Docker has no $image; build it first (scripts/testbed-up.sh)"
  podman_id=$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  if [ "${docker_id#sha256:}" != "${podman_id#sha256:}" ]; then
    say "loading $image into Podman"
    docker save "$image" | "${PODMAN[@]}" load -q >/dev/null
  fi
}
copy_image "$DEMO_IMAGE"
copy_image "$PROFILER_IMAGE"
# devprof runs a sidecar only from a profiler image it trusts on that endpoint
# (docs/security.md): with DEVPROF_BIN (test.sh sets it), the copy is trusted on Podman's.
if [ -n "${DEVPROF_BIN:-}" ]; then
  DOCKER_HOST="unix://$SOCKET" "$DEVPROF_BIN" trust "$PROFILER_IMAGE" >/dev/null \
    || die "devprof trust $PROFILER_IMAGE on Podman failed"
  say "trusted $PROFILER_IMAGE on unix://$SOCKET"
fi

# 4. Demo containers: the demo devnet's rights and settings (compose/demo.yml), explicit
# resource limits (Podman's defaults are refused by this kernel), podman-compose's labels.
conf() {
  local name=$1
  echo "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:17,lg_prof_interval:-1,prof_prefix:/profiling/jeprof.$name"
}
for name in "${NAMES[@]}"; do
  image_id=$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$DEMO_IMAGE")
  # Kept only when its node really runs: Podman's records can say "running" for a container
  # whose process is gone (a machine restored or rebooted under them).
  if [ "$("${PODMAN[@]}" inspect --format '{{.State.Running}} {{.Image}}' "$name" 2>/dev/null)" = "true $image_id" ] \
    && "${PODMAN[@]}" exec "$name" pgrep -x demo-node >/dev/null 2>&1; then
    continue
  fi
  "${PODMAN[@]}" rm -f -t 2 "$name" >/dev/null 2>&1 || true
  case "$name" in
    *seq*) workloads="hash_chain:40,state_lookup:15,contend_lock:10,sync_writes:10,mmap_reads:10,alloc_blocks:5" ;;
    *) workloads="state_lookup:10" ;;
  esac
  service=${name#pod-}
  say "starting $name"
  "${PODMAN[@]}" run -d --name "$name" --hostname "$name" --init --network none \
    --cap-add SYS_ADMIN --cap-add SYS_PTRACE --cap-add SYSLOG --cap-add IPC_LOCK \
    --security-opt seccomp=unconfined \
    --ulimit nofile=16384:16384 --ulimit nproc=16384:16384 \
    -v /sys/kernel/tracing:/sys/kernel/tracing:ro \
    -v "$name-profiling:/profiling" -v "$name-data:/data" \
    --label "io.podman.compose.project=$PROJECT" --label "io.podman.compose.service=$service" \
    -e "DEMO_WORKLOADS=$workloads" -e DEMO_DATA_DIR=/data -e DEMO_LOCK_THREADS=4 \
    -e DEMO_ALLOC_MAX_MB=128 -e "_RJEM_MALLOC_CONF=$(conf "$name")" -e "MALLOC_CONF=$(conf "$name")" \
    "$DEMO_IMAGE" >/dev/null
done
for name in "${NAMES[@]}"; do
  for _ in $(seq 1 100); do
    "${PODMAN[@]}" exec "$name" pgrep -x demo-node >/dev/null 2>&1 && break
    sleep 0.2
  done
  if ! "${PODMAN[@]}" exec "$name" pgrep -x demo-node >/dev/null 2>&1; then
    # Say what is there, so a failure on a fresh machine can be read from CI's log alone.
    "${PODMAN[@]}" ps -a --format '{{.Names}} {{.Status}}' >&2 || true
    "${PODMAN[@]}" inspect --format 'state: {{.State.Status}} exit {{.State.ExitCode}} {{.State.Error}}' "$name" >&2 || true
    "${PODMAN[@]}" logs --tail 20 "$name" >&2 || true
    "${PODMAN[@]}" exec "$name" pgrep -x demo-node >&2 || true
    tail -n 20 "$RUN_DIR/service.log" >&2 || true
    die "$name runs no demo-node"
  fi
done
say "ready in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s: DOCKER_HOST=unix://$SOCKET (${NAMES[*]})"
