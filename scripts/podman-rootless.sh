#!/usr/bin/env bash
# Rootless Podman, tried for real: an unprivileged user (devprof-rootless, with subordinate
# ids) runs its own `podman system service` and a demo node in its own storage, and
# devprof records from it through that user's socket. Prints what each step gave and
# checks whichever is true here: a working capture, or a refusal that names the reason
# (a rootless endpoint, perf_event_open in a user namespace). Exits non-zero when cpu
# neither works nor says why. Removes the container, the service and the run directory
# afterwards (the user and its image storage stay, so a second run is quick).
#
# Also tries heap, which needs no perf, and says what it gave.
#
# Needs root, podman (scripts/podman-up.sh installs it), the demo image in Docker's storage
# and target/debug/devprof (or DEVPROF). Environment: DEVPROF_DEMO_IMAGE, DEVPROF.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
USER_NAME=devprof-rootless
NAME=rl-demo-seq
DEMO_IMAGE="${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}"
DEVPROF="${DEVPROF:-$ROOT/target/debug/devprof}"

say() { echo "podman-rootless: $*"; }
die() { echo "podman-rootless: error: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (to make the user and start its service)"
[ -x "$DEVPROF" ] || die "no $DEVPROF (cargo build)"
command -v podman >/dev/null || die "no podman (scripts/podman-up.sh installs it)"

# The user, with subordinate ids for its user namespace.
if ! id "$USER_NAME" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/sh "$USER_NAME"
fi
for f in /etc/subuid /etc/subgid; do
  grep -q "^$USER_NAME:" "$f" 2>/dev/null || echo "$USER_NAME:200000:65536" >>"$f"
done
uid=$(id -u "$USER_NAME")
RUN_DIR="/run/user/$uid"
SOCKET="unix://$RUN_DIR/podman.sock"
mkdir -p "$RUN_DIR"
chown "$USER_NAME:" "$RUN_DIR"
chmod 700 "$RUN_DIR"
as_user() {
  runuser -u "$USER_NAME" -- env HOME="/home/$USER_NAME" XDG_RUNTIME_DIR="$RUN_DIR" \
    podman --cgroup-manager=cgroupfs --events-backend=file --runtime runc "$@"
}

WORK=$(mktemp -d /tmp/devprof-rootless.XXXXXX)
chmod 755 "$WORK"
service=""
cleanup() {
  as_user rm -f -t 1 "$NAME" >/dev/null 2>&1 || true
  [ -n "$service" ] && kill "$service" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The image, in the user's own storage.
docker_id=$(docker image inspect -f '{{.Id}}' "$DEMO_IMAGE") || die "Docker has no $DEMO_IMAGE"
user_id=$(as_user image inspect --format '{{.Id}}' "$DEMO_IMAGE" 2>/dev/null || true)
if [ "${docker_id#sha256:}" != "${user_id#sha256:}" ]; then
  say "loading $DEMO_IMAGE into $USER_NAME's storage"
  docker save "$DEMO_IMAGE" >"$WORK/image.tar"
  chmod 644 "$WORK/image.tar"
  as_user load -q -i "$WORK/image.tar" >/dev/null
  rm -f "$WORK/image.tar"
fi

# The user's service and a demo node under it, with the rights the demo devnet asks for.
as_user system service --time=0 "$SOCKET" >"$WORK/service.log" 2>&1 &
service=$!
for _ in $(seq 1 100); do
  curl -sf --max-time 2 --unix-socket "$RUN_DIR/podman.sock" http://d/_ping >/dev/null 2>&1 && break
  sleep 0.1
done
as_user rm -f "$NAME" >/dev/null 2>&1 || true
conf="prof:true,prof_active:true,prof_accum:true,lg_prof_sample:17,lg_prof_interval:-1,prof_prefix:/profiling/jeprof.$NAME"
as_user run -d --name "$NAME" --network none --cap-add PERFMON --cap-add SYS_PTRACE \
  --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --tmpfs /profiling:mode=1777 \
  -e DEMO_WORKLOADS=hash_chain:20,alloc_blocks:5 -e DEMO_ALLOC_MAX_MB=64 \
  -e "_RJEM_MALLOC_CONF=$conf" -e "MALLOC_CONF=$conf" "$DEMO_IMAGE" >/dev/null \
  || die "the user's container did not start"
sleep 1
say "kernel.perf_event_paranoid = $(cat /proc/sys/kernel/perf_event_paranoid)"
say "security options: $(curl -s --unix-socket "$RUN_DIR/podman.sock" http://d/info | python3 -c 'import json,sys; print(json.load(sys.stdin).get("SecurityOptions"))')"

cd "$WORK"
set +e
DOCKER_HOST="$SOCKET" "$DEVPROF" doctor "$NAME" >"$WORK/doctor.txt" 2>&1
say "doctor exit $?: $(grep -m1 'container endpoint' "$WORK/doctor.txt" | sed 's/^ *//')"
# Heap needs no perf: jemalloc writes its dumps, devprof signals the process and copies
# them out.
DOCKER_HOST="$SOCKET" "$DEVPROF" heap "$NAME" >"$WORK/heap.out" 2>"$WORK/heap.err"
heap=$?
if [ "$heap" = 0 ]; then
  say "heap WORKS rootless: $(head -1 "$WORK/heap.out")"
else
  say "heap exit $heap:"; sed 's/^/  /' "$WORK/heap.err"
fi
DOCKER_HOST="$SOCKET" "$DEVPROF" cpu "$NAME" 2 --mode exec >"$WORK/cpu.out" 2>"$WORK/cpu.err"
code=$?
set -e
if [ "$code" = 0 ]; then
  say "cpu in exec mode WORKS rootless:"
  cat "$WORK/cpu.out"
  exit 0
fi
say "cpu in exec mode exit $code:"
sed 's/^/  /' "$WORK/cpu.err"
grep -q "rootless" "$WORK/cpu.err" && grep -q "user namespace" "$WORK/cpu.err" \
  || die "the refusal does not name the reason (a rootless endpoint)"
say "refused, and the refusal names the reason"
