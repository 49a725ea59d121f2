#!/usr/bin/env bash
# Builds the runtime images of the test bed, all at once (their downloads and compiles
# overlap), FROM the local Debian base:
#   devprof-demo-jvm   Debian's OpenJDK 17 running demo/jvm, with async-profiler (built
#                      here from its source tarball), jcmd and perf
#   devprof-demo-js    Debian's nodejs running demo/js, with perf
#   devprof-demo-py    Debian's python3 running demo/py, with perf
#   devprof-demo-go    a stripped Go binary (demo/go, Debian's golang-go), with perf
#   devprof-profiler   the sidecar image: perf, procps, binutils, curl and py-spy
# Each build gets a temporary context holding only what its Dockerfile copies. Quiet on
# success (one line per image with its build time); on failure the end of that build's log
# is printed. Safe to re-run: Docker's cache makes a repeat build quick.
#
# Environment: DEVPROF_BASE_IMAGE, DEVPROF_DEMO_{JVM,JS,PY,GO}_IMAGE,
# DEVPROF_PROFILER_IMAGE, DEVPROF_ASYNC_PROFILER_SRC (the async-profiler source tarball;
# default: the newest async-profiler-*-src.tar.gz in ../shared/vendor next to this
# repository, or vendor/ in it), DEVPROF_PY_SPY_VERSION.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

BASE_IMAGE="${DEVPROF_BASE_IMAGE:-debian:bookworm-slim}"
JVM_IMAGE="${DEVPROF_DEMO_JVM_IMAGE:-devprof-demo-jvm:latest}"
JS_IMAGE="${DEVPROF_DEMO_JS_IMAGE:-devprof-demo-js:latest}"
PY_IMAGE="${DEVPROF_DEMO_PY_IMAGE:-devprof-demo-py:latest}"
GO_IMAGE="${DEVPROF_DEMO_GO_IMAGE:-devprof-demo-go:latest}"
PROFILER_IMAGE="${DEVPROF_PROFILER_IMAGE:-devprof-profiler:latest}"
PY_SPY_VERSION="${DEVPROF_PY_SPY_VERSION:-0.4.3}"

say() { echo "runtime-images: $*"; }
die() { echo "runtime-images: error: $*" >&2; exit 1; }

docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || DEVPROF_BASE_IMAGE="$BASE_IMAGE" scripts/base-image.sh

asprof_src="${DEVPROF_ASYNC_PROFILER_SRC:-}"
if [ -z "$asprof_src" ]; then
  for dir in "$ROOT/../shared/vendor" "$ROOT/vendor"; do
    found="$(ls -1 "$dir"/async-profiler-*-src.tar.gz 2>/dev/null | sort -V | tail -n 1 || true)"
    [ -n "$found" ] && { asprof_src="$found"; break; }
  done
fi
[ -n "$asprof_src" ] && [ -r "$asprof_src" ] || die "no async-profiler source tarball: set DEVPROF_ASYNC_PROFILER_SRC (async-profiler is in no package registry; see ../shared/vendor/README.md)"

WORK="$(mktemp -d /tmp/devprof-runtime-images.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

# context NAME DOCKERFILE FILE...: a build context with the Dockerfile and the files.
context() {
  local name="$1" dockerfile="$2"; shift 2
  mkdir -p "$WORK/$name"
  cp "dockerfiles/$dockerfile" "$WORK/$name/Dockerfile"
  [ "$#" -eq 0 ] || cp "$@" "$WORK/$name/"
}

# build NAME TAG: builds $WORK/NAME, log in $WORK/NAME.log, time in $WORK/NAME.time.
build() {
  local name="$1" tag="$2" start
  start=$(date +%s)
  if docker build --network host --force-rm --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$tag" \
      "$WORK/$name" >"$WORK/$name.log" 2>&1; then
    echo "$tag $(( $(date +%s) - start ))" >"$WORK/$name.time"
  else
    return 1
  fi
}

context jvm demo-jvm.Dockerfile demo/jvm/DemoJvm.java
# The Dockerfile copies the tarball by this name, whatever its version here.
cp "$asprof_src" "$WORK/jvm/async-profiler-src.tar.gz"
context js demo-js.Dockerfile demo/js/busy.js
context py demo-py.Dockerfile demo/py/busy.py
context go demo-go.Dockerfile demo/go/go.mod demo/go/main.go

# py-spy ships as a static binary inside its PyPI wheel: fetched on this machine with pip
# (so pip's own configuration decides where from), unpacked into the profiler's context.
context profiler profiler.Dockerfile
case "$(docker version --format '{{.Server.Arch}}' 2>/dev/null || uname -m)" in
  amd64|x86_64) arch=x86_64 ;;
  arm64|aarch64) arch=aarch64 ;;
  *) die "no py-spy wheel for architecture $(uname -m)" ;;
esac
python3 -m pip --version >/dev/null 2>&1 || die "python3 with pip is needed to fetch the py-spy wheel"
if ! python3 -m pip download "py-spy==$PY_SPY_VERSION" --no-deps --only-binary=:all: \
      --platform "manylinux2014_$arch" -d "$WORK/wheel" >"$WORK/wheel.log" 2>&1; then
  tail -n 20 "$WORK/wheel.log" >&2
  die "could not download the py-spy $PY_SPY_VERSION wheel with pip"
fi
python3 - "$WORK" <<'PYEOF'
import glob, os, sys, zipfile
work = sys.argv[1]
wheel = glob.glob(os.path.join(work, "wheel", "py_spy-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/py-spy"))
    with z.open(name) as src, open(os.path.join(work, "profiler", "py-spy"), "wb") as dst:
        dst.write(src.read())
os.chmod(os.path.join(work, "profiler", "py-spy"), 0o755)
PYEOF

say "building $JVM_IMAGE, $JS_IMAGE, $PY_IMAGE, $GO_IMAGE and $PROFILER_IMAGE (in parallel)"
pids=()
names=(jvm js py go profiler)
tags=("$JVM_IMAGE" "$JS_IMAGE" "$PY_IMAGE" "$GO_IMAGE" "$PROFILER_IMAGE")
for i in "${!names[@]}"; do
  build "${names[$i]}" "${tags[$i]}" &
  pids+=($!)
done
failed=()
for i in "${!names[@]}"; do
  if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
done
for name in "${names[@]}"; do
  [ -f "$WORK/$name.time" ] && say "  $(cut -d' ' -f1 "$WORK/$name.time") built in $(cut -d' ' -f2 "$WORK/$name.time") s"
done
if [ "${#failed[@]}" -gt 0 ]; then
  for name in "${failed[@]}"; do
    echo "runtime-images: --- end of the $name build log ---" >&2
    tail -n 40 "$WORK/$name.log" >&2
  done
  die "building ${failed[*]} failed"
fi
