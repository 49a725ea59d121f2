#!/usr/bin/env bash
# Makes the local Rust toolchain image (DEVPROF_RUST_IMAGE, default rust:1-slim-bookworm)
# that `devprof build source` compiles in. Nothing can be pulled on the test bed, and
# Debian's own rustc is too old for the demo node's dependencies, so when the image is
# absent it is built FROM the local Debian base (scripts/base-image.sh) with this
# machine's rustup toolchain copied in (dockerfiles/rust-toolchain.Dockerfile): rustc,
# cargo and the standard library of the host target, taken from `rustc --print sysroot`,
# and the host's CA certificates.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

IMAGE="${DEVPROF_RUST_IMAGE:-rust:1-slim-bookworm}"
BASE_IMAGE="${DEVPROF_BASE_IMAGE:-debian:bookworm-slim}"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "rust image $IMAGE already present"
  exit 0
fi

if docker pull "$IMAGE" >/dev/null 2>&1; then
  echo "rust image $IMAGE pulled"
  exit 0
fi

if ! command -v rustc >/dev/null && [ -x "$HOME/.cargo/bin/rustc" ]; then
  PATH="$HOME/.cargo/bin:$PATH"
fi
command -v rustc >/dev/null || { echo "error: no rustc on this machine to put into $IMAGE" >&2; exit 1; }
SYSROOT="$(rustc --print sysroot)"
[ -x "$SYSROOT/bin/cargo" ] || { echo "error: $SYSROOT has no cargo (a rustup toolchain has both)" >&2; exit 1; }
docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || DEVPROF_BASE_IMAGE="$BASE_IMAGE" scripts/base-image.sh

CTX="$(mktemp -d /tmp/devprof-rust-ctx.XXXXXX)"
trap 'rm -rf "$CTX"' EXIT
cp dockerfiles/rust-toolchain.Dockerfile "$CTX/Dockerfile"
# Carry over the host's trust store (a TLS-intercepting proxy's CA, say), as
# base-image.sh carries over the host's apt settings: cargo in image builds then reaches
# crates.io as cargo on the host does.
if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$CTX/host-ca-certificates.crt"
else
  : >"$CTX/host-ca-certificates.crt"
fi

echo "making $IMAGE from $BASE_IMAGE and $(rustc --version) ..."
# The context: the Dockerfile, and the toolchain under toolchain/ (no docs, no sources,
# no other components: about 500 MB).
if ! tar -c -C "$CTX" Dockerfile host-ca-certificates.crt \
      -C "$SYSROOT" --transform 's,^\(bin\|lib\)/,toolchain/\1/,' bin/rustc bin/cargo lib \
    | docker build --network host --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$IMAGE" - >"$CTX/build.log" 2>&1; then
  tail -n 30 "$CTX/build.log" >&2
  echo "error: building $IMAGE failed" >&2
  exit 1
fi
echo "rust image $IMAGE made ($(docker run --rm "$IMAGE" rustc --version))"
