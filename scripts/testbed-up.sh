#!/usr/bin/env bash
# Brings the demo devnet (compose/demo.yml, containers demo-seq and demo-rpc) up:
#   1. the local base image (scripts/base-image.sh) and Rust toolchain image
#      (scripts/rust-image.sh),
#   2. devprof and the demo-node binary on the host (cargo build --release),
#   3. the demo node image, built from source by `devprof build source` (the Rust source
#      Dockerfile: frame pointers, full debuginfo, perf and jemalloc's tools; the
#      dependencies stay in a cached layer until Cargo.lock or a manifest changes), the
#      plain image, and — at the same time, in the background — the runtime images
#      (JVM, Node, Python, Go) and the profiler image of sidecars
#      (scripts/runtime-images.sh),
#   4. the hostile service's image (demo/hostile, FROM the profiler image: no download),
#   5. the containers, then waits until each service's program runs.
# Idempotent: re-running rebuilds what changed and recreates containers whose image changed.
#
# Environment: DEVPROF_DEMO_IMAGE (image tag, default devprof-demo-node:latest),
# DEVPROF_BASE_IMAGE (default debian:bookworm-slim), DEVPROF_RUST_IMAGE (default
# rust:1-slim-bookworm), DEVPROF_PROFILER_IMAGE, CARGO_TARGET_DIR, and the DEMO_*
# settings read by compose/demo.yml.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

export DEVPROF_DEMO_IMAGE="${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}"
BASE_IMAGE="${DEVPROF_BASE_IMAGE:-debian:bookworm-slim}"
PROJECT=devprof-demo
COMPOSE=(docker-compose -f "$ROOT/compose/demo.yml" -p "$PROJECT")
SERVICES=(demo-seq demo-rpc demo-blocks demo-jvm demo-js demo-py demo-go demo-hostile)
# The program each service runs (pgrep -x), for the wait at the end.
declare -A PROGRAM=([demo-seq]=demo-node [demo-rpc]=demo-node [demo-blocks]=demo-node [demo-jvm]=java
                    [demo-js]=node [demo-py]=python3 [demo-go]=demo-go [demo-hostile]=hostile)
WAIT_SECS="${DEVPROF_TESTBED_WAIT:-60}"

say() { echo "testbed-up: $*"; }
die() { echo "testbed-up: error: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker is not installed"
command -v docker-compose >/dev/null || die "docker-compose is not installed"
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
  PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null || die "cargo is not installed"
docker info >/dev/null 2>&1 || die "cannot talk to the Docker engine"

# 1. Base image.
say "base image $BASE_IMAGE"
DEVPROF_BASE_IMAGE="$BASE_IMAGE" "$ROOT/scripts/base-image.sh"

RUST_IMAGE="${DEVPROF_RUST_IMAGE:-rust:1-slim-bookworm}"
say "rust image $RUST_IMAGE"
DEVPROF_RUST_IMAGE="$RUST_IMAGE" DEVPROF_BASE_IMAGE="$BASE_IMAGE" "$ROOT/scripts/rust-image.sh"

# The runtime images and the profiler image take minutes of downloads and compiles that
# do not depend on devprof: they build in the background meanwhile.
RUNTIME_LOG="$(mktemp /tmp/devprof-runtime-images.XXXXXX)"
say "runtime and profiler images (scripts/runtime-images.sh, in the background)"
"$ROOT/scripts/runtime-images.sh" >"$RUNTIME_LOG" 2>&1 &
RUNTIME_PID=$!

# 2. devprof (it builds the images), the demo-node binary (for the plain image) and the
#    hostile service's binary.
locked=()
[ -f Cargo.lock ] && locked=(--locked)
say "cargo build --release -p devprof -p demo-node -p demo-hostile ${locked[*]}"
cargo build --release -p devprof -p demo-node -p demo-hostile "${locked[@]}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET_DIR/release/demo-node"
HOSTILE_BIN="$TARGET_DIR/release/hostile"
DEVPROF="$TARGET_DIR/release/devprof"
[ -x "$BIN" ] || die "$BIN was not built"
[ -x "$HOSTILE_BIN" ] || die "$HOSTILE_BIN was not built"
[ -x "$DEVPROF" ] || die "$DEVPROF was not built"

# 3. The demo node image, built from source by devprof itself. Its log goes to a file
#    (shown when the build fails); the summary and the image check are printed.
LOGS="$(mktemp -d /tmp/devprof-testbed-logs.XXXXXX)"
trap 'rm -rf "$LOGS"; kill "$RUNTIME_PID" 2>/dev/null || true' EXIT
devprof_build() {
  local log="$LOGS/$1.log"; shift
  if ! "$DEVPROF" build "$@" >"$log.out" 2>"$log"; then
    tail -n 40 "$log" >&2
    cat "$log.out" >&2
    return 1
  fi
  sed 's/^/testbed-up:   /' "$log.out"
}
before="$(docker image inspect -f '{{.Id}}' "$DEVPROF_DEMO_IMAGE" 2>/dev/null || true)"
say "devprof build source -p demo-node -t $DEVPROF_DEMO_IMAGE (from source, in $RUST_IMAGE)"
devprof_build demo source "$ROOT" --package demo-node --bin demo-node --tag "$DEVPROF_DEMO_IMAGE" \
  --base "$BASE_IMAGE" --rust-image "$RUST_IMAGE" --label devprof.image=demo-node \
  || die "devprof build of $DEVPROF_DEMO_IMAGE failed"
after="$(docker image inspect -f '{{.Id}}' "$DEVPROF_DEMO_IMAGE")"
if [ "$before" = "$after" ]; then
  say "image $DEVPROF_DEMO_IMAGE unchanged (${after:7:12})"
else
  say "image $DEVPROF_DEMO_IMAGE built (${after:7:12})"
fi

# small_image TAG DOCKERFILE BINARY BUILD-ARG: an image from a context holding only the
# Dockerfile and one host-built binary.
small_image() {
  local tag="$1" dockerfile="$2" binary="$3" arg="$4" ctx
  ctx="$(mktemp -d /tmp/devprof-image-ctx.XXXXXX)"
  cp "dockerfiles/$dockerfile" "$ctx/Dockerfile"
  cp "$binary" "$ctx/"
  say "docker build -t $tag"
  if ! docker build --build-arg "$arg" -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
    tail -n 40 "$ctx/build.log" >&2
    rm -rf "$ctx"
    die "docker build of $tag failed"
  fi
  rm -rf "$ctx"
}

# The plain demo image (no perf, no tools) that sidecar profiling is tested on.
PLAIN_IMAGE="${DEVPROF_DEMO_PLAIN_IMAGE:-devprof-demo-plain:latest}"
small_image "$PLAIN_IMAGE" demo-plain.Dockerfile "$BIN" "BASE_IMAGE=$BASE_IMAGE"

# The runtime images and the profiler image sidecars run (perf, procps, binutils, curl,
# py-spy).
if ! wait "$RUNTIME_PID"; then
  cat "$RUNTIME_LOG" >&2
  rm -f "$RUNTIME_LOG"
  die "building the runtime images failed"
fi
sed 's/^/testbed-up:   /' "$RUNTIME_LOG"
rm -f "$RUNTIME_LOG"

# 4. The hostile service (demo/hostile): the profiler image (perf, procps) with the
#    hostile binary and a non-root user; nothing is downloaded.
export DEVPROF_DEMO_HOSTILE_IMAGE="${DEVPROF_DEMO_HOSTILE_IMAGE:-devprof-demo-hostile:latest}"
small_image "$DEVPROF_DEMO_HOSTILE_IMAGE" demo-hostile.Dockerfile "$HOSTILE_BIN" \
  "PROFILER_IMAGE=${DEVPROF_PROFILER_IMAGE:-devprof-profiler:latest}"

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

# 5. The containers. Compose recreates a container when its image or settings changed.
say "docker-compose -p $PROJECT up -d"
"${COMPOSE[@]}" up -d --remove-orphans

# A container started before tracefs was mounted sees an empty directory: recreate it.
if grep -qs ' /sys/kernel/tracing tracefs ' /proc/mounts; then
  for svc in "${SERVICES[@]}"; do
    if ! docker exec "$svc" test -e /sys/kernel/tracing/events 2>/dev/null; then
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
    sleep 1
  done
done
say "devnet up: project $PROJECT, image $DEVPROF_DEMO_IMAGE"
