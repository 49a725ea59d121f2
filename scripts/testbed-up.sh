#!/usr/bin/env bash
# Brings the demo devnet (compose/demo.yml, project devprof-demo) up.
#
#   scripts/testbed-up.sh demo   devprof and demo-seq only: what scripts/demo.sh needs
#   scripts/testbed-up.sh [all]  the whole test bed: every service, every image
#
# Work that does not depend on the build runs beside it, in the background: the local
# base image (scripts/base-image.sh) and the demo image's runtime stage (Debian's perf,
# procps, binutils, jemalloc's tools); for `all` also the runtime and profiler images
# (scripts/runtime-images.sh) and the Rust toolchain image (scripts/rust-image.sh, for
# `devprof build source` in tests/build.rs). Meanwhile cargo builds devprof and the demo
# node on the host (release, frame pointers from .cargo/config.toml, full debuginfo for
# the demo node from Cargo.toml). The demo image is then that binary on the runtime stage
# (dockerfiles/demo-node.Dockerfile); demo-seq starts as soon as it exists.
# Idempotent: re-running rebuilds what changed and recreates only containers whose image
# or settings changed. Each line carries the time since the start ([+S.Ds]; DEVPROF_T0_NS
# carries a caller's start, in ns since the epoch).
#
# Environment: DEVPROF_DEMO_IMAGE (default devprof-demo-node:latest), DEVPROF_BASE_IMAGE
# (default debian:bookworm-slim), DEVPROF_RUST_IMAGE, DEVPROF_PROFILER_IMAGE,
# DEVPROF_DEMO_PLAIN_IMAGE, DEVPROF_DEMO_HOSTILE_IMAGE, CARGO_TARGET_DIR,
# DEVPROF_TESTBED_WAIT (seconds to wait for the programs, default 60), and the DEMO_*
# settings read by compose/demo.yml.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
MODE="${1:-all}"
STEPS_NAME=testbed-up
. scripts/lib/steps.sh

export DEVPROF_DEMO_IMAGE="${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}"
export DEVPROF_DEMO_HOSTILE_IMAGE="${DEVPROF_DEMO_HOSTILE_IMAGE:-devprof-demo-hostile:latest}"
BASE_IMAGE="${DEVPROF_BASE_IMAGE:-debian:bookworm-slim}"
PLAIN_IMAGE="${DEVPROF_DEMO_PLAIN_IMAGE:-devprof-demo-plain:latest}"
PROFILER_IMAGE="${DEVPROF_PROFILER_IMAGE:-devprof-profiler:latest}"
PROJECT=devprof-demo
COMPOSE=(docker-compose -f "$ROOT/compose/demo.yml" -p "$PROJECT")
# The program each service runs (pgrep -x), for the wait at the end.
declare -A PROGRAM=([demo-seq]=demo-node [demo-rpc]=demo-node [demo-blocks]=demo-node [demo-jvm]=java
                    [demo-js]=node [demo-py]=python3 [demo-go]=demo-go [demo-hostile]=hostile)
case "$MODE" in
  demo) SERVICES=(demo-seq) ;;
  all) SERVICES=(demo-seq demo-rpc demo-blocks demo-jvm demo-js demo-py demo-go demo-hostile) ;;
  *) echo "usage: scripts/testbed-up.sh [demo|all]" >&2; exit 2 ;;
esac
WAIT_SECS="${DEVPROF_TESTBED_WAIT:-60}"

die() { echo "testbed-up $(stamp): error: $*" >&2; exit 1; }
# stamped: each line of the input with the time it was read, so output collected from a
# background job still tells when each of its steps happened.
stamped() { while IFS= read -r line; do echo "testbed-up $(stamp):   $line"; done; }

command -v docker >/dev/null || die "docker is not installed"
command -v docker-compose >/dev/null || die "docker-compose is not installed"
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
  PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null || die "cargo is not installed"
docker info >/dev/null 2>&1 || die "cannot talk to the Docker engine"

# The containers bind-mount the host's tracefs; it must be mounted before they start.
if ! grep -qs ' /sys/kernel/tracing tracefs ' /proc/mounts; then
  if [ "$(id -u)" = 0 ]; then
    say "mounting tracefs on /sys/kernel/tracing"
    mount -t tracefs nodev /sys/kernel/tracing
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    say "mounting tracefs on /sys/kernel/tracing (sudo)"
    sudo -n mount -t tracefs nodev /sys/kernel/tracing
  else
    say "warning: tracefs is not mounted on /sys/kernel/tracing; tracepoints will not work in the containers"
  fi
fi

# Background jobs: each writes its log to $LOGS/NAME.log and then $LOGS/NAME.ok or
# $LOGS/NAME.failed (another job may wait for it: `after NAME`); `await NAME` prints the
# log and fails with its end when the job did.
LOGS="$(mktemp -d /tmp/devprof-testbed.XXXXXX)"
declare -A JOB=()
cleanup() {
  local pid
  for pid in "${JOB[@]}"; do kill_tree "$pid"; done
  rm -rf "$LOGS"
}
trap cleanup EXIT
# A signal ends the script through its EXIT trap, which stops the jobs.
trap 'exit 130' INT
trap 'exit 143' TERM
job() {
  local name="$1"; shift
  { ( if "$@"; then touch "$LOGS/$name.ok"; else touch "$LOGS/$name.failed"; fi ) 2>&1 \
    | stamped >"$LOGS/$name.log"; } &
  JOB[$name]=$!
}
after() {
  local name="$1"
  while [ ! -e "$LOGS/$name.ok" ]; do
    [ ! -e "$LOGS/$name.failed" ] || { echo "($name failed)"; return 1; }
    sleep 0.5
  done
}
await() {
  local name="$1"
  wait "${JOB[$name]}" || true
  unset "JOB[$name]"
  if [ ! -e "$LOGS/$name.ok" ]; then
    tail -n 40 "$LOGS/$name.log" >&2
    die "$name failed"
  fi
  cat "$LOGS/$name.log"
}

# docker_build TAG DOCKERFILE [--target STAGE] [--build-arg ARG]... [FILE]...: an image
# from a context holding only the Dockerfile and the given files.
docker_build() {
  local tag="$1" dockerfile="$2" ctx; shift 2
  local args=()
  while [ "$#" -gt 0 ] && [[ "$1" == --* ]]; do args+=("$1" "$2"); shift 2; done
  ctx="$(mktemp -d "$LOGS/ctx.XXXXXX")"
  cp "dockerfiles/$dockerfile" "$ctx/Dockerfile"
  [ "$#" -gt 0 ] && cp "$@" "$ctx/"
  # The host's network, as the other image scripts: apt reaches its mirror from there.
  if ! docker build --network host "${args[@]}" -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
    tail -n 40 "$ctx/build.log" >&2
    return 1
  fi
  rm -rf "$ctx"
}

base_image() { DEVPROF_BASE_IMAGE="$BASE_IMAGE" "$ROOT/scripts/base-image.sh"; }
node_runtime() {
  after base || return 1
  docker_build "devprof-demo-node:runtime" demo-node.Dockerfile --target runtime \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" || return 1
  echo "demo image's runtime stage ready"
}
runtime_images() { after base || return 1; DEVPROF_BASE_IMAGE="$BASE_IMAGE" "$ROOT/scripts/runtime-images.sh"; }
rust_image() { after base || return 1; DEVPROF_BASE_IMAGE="$BASE_IMAGE" "$ROOT/scripts/rust-image.sh"; }

say "background: base image $BASE_IMAGE, the demo image's runtime stage"
job base base_image
job node-runtime node_runtime
if [ "$MODE" = all ]; then
  say "background: runtime and profiler images, Rust toolchain image"
  job runtime runtime_images
  job rust rust_image
fi

locked=()
[ -f Cargo.lock ] && locked=(--locked)
# The demo programs' frame pointers come from .cargo/config.toml, which a RUSTFLAGS in
# the environment replaces: keep them.
if [ -n "${RUSTFLAGS:-}" ] && [[ "$RUSTFLAGS" != *force-frame-pointers=yes* ]]; then
  export RUSTFLAGS="$RUSTFLAGS -C force-frame-pointers=yes"
fi
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ "$MODE" = demo ]; then
  # The release binary users get (cargo install builds the same) and the demo node.
  say "cargo build --release -p devprof -p demo-node"
  cargo build --release "${locked[@]}" -p devprof -p demo-node
else
  # The tests build devprof in the test profile; the test bed needs only the programs
  # its images run.
  say "cargo build --release -p demo-node -p demo-hostile"
  cargo build --release "${locked[@]}" -p demo-node -p demo-hostile
fi
BIN="$TARGET_DIR/release/demo-node"
[ -x "$BIN" ] || die "$BIN was not built"
say "cargo build done"

await base
await node-runtime
before="$(docker image inspect -f '{{.Id}}' "$DEVPROF_DEMO_IMAGE" 2>/dev/null || true)"
docker_build "$DEVPROF_DEMO_IMAGE" demo-node.Dockerfile --build-arg "BASE_IMAGE=$BASE_IMAGE" "$BIN" \
  || die "docker build of $DEVPROF_DEMO_IMAGE failed"
after="$(docker image inspect -f '{{.Id}}' "$DEVPROF_DEMO_IMAGE")"
if [ "$before" = "$after" ]; then
  say "image $DEVPROF_DEMO_IMAGE unchanged (${after:7:12})"
else
  say "image $DEVPROF_DEMO_IMAGE built (${after:7:12})"
fi

# up SERVICE...: starts (or leaves running) the services; compose recreates a container
# only when its image or settings changed.
up() {
  say "docker-compose -p $PROJECT up -d $*"
  "${COMPOSE[@]}" up -d --no-deps "$@" 2>&1 | stamped
}
up demo-seq

if [ "$MODE" = all ]; then
  # The plain demo image (no perf, no tools) that sidecar profiling is tested on.
  say "docker build -t $PLAIN_IMAGE"
  docker_build "$PLAIN_IMAGE" demo-plain.Dockerfile --build-arg "BASE_IMAGE=$BASE_IMAGE" "$BIN" \
    || die "docker build of $PLAIN_IMAGE failed"
  await runtime
  # The hostile service (demo/hostile): the profiler image (perf, procps) with the hostile
  # binary and a non-root user; nothing is downloaded.
  say "docker build -t $DEVPROF_DEMO_HOSTILE_IMAGE"
  docker_build "$DEVPROF_DEMO_HOSTILE_IMAGE" demo-hostile.Dockerfile \
    --build-arg "PROFILER_IMAGE=$PROFILER_IMAGE" "$TARGET_DIR/release/hostile" \
    || die "docker build of $DEVPROF_DEMO_HOSTILE_IMAGE failed"
  up --remove-orphans "${SERVICES[@]:1}"
  await rust
fi

# A container started before tracefs was mounted sees an empty directory: recreate it.
# Checked as root: a service's own user may not read /sys/kernel/tracing.
if grep -qs ' /sys/kernel/tracing tracefs ' /proc/mounts; then
  for svc in "${SERVICES[@]}"; do
    if ! docker exec -u 0 "$svc" test -e /sys/kernel/tracing/events 2>/dev/null; then
      say "$svc does not see tracefs; recreating it"
      "${COMPOSE[@]}" up -d --force-recreate --no-deps "$svc"
    fi
  done
fi

# Drop superseded demo node images: untagged ones no container uses any more.
docker image prune -f --filter label=devprof.image=demo-node >/dev/null || true

say "waiting for the programs of ${SERVICES[*]}"
deadline=$((SECONDS + WAIT_SECS))
for svc in "${SERVICES[@]}"; do
  while :; do
    state="$(docker inspect -f '{{.State.Status}}' "$svc" 2>/dev/null || echo missing)"
    if [ "$state" = running ] && pid="$(docker exec "$svc" pgrep -x "${PROGRAM[$svc]}" 2>/dev/null)"; then
      say "$svc: running, ${PROGRAM[$svc]} pid $(echo "$pid" | tr '\n' ' ')(in the container)"
      break
    fi
    if [ "$state" = exited ] || [ "$state" = dead ] || [ "$SECONDS" -ge "$deadline" ]; then
      docker logs --tail 30 "$svc" >&2 || true
      die "$svc is not running ${PROGRAM[$svc]} (state: $state)"
    fi
    sleep 0.2
  done
done
say "devnet up ($MODE): project $PROJECT, image $DEVPROF_DEMO_IMAGE"
