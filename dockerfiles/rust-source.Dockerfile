# A profiling image of a Rust program built from source, made by `devprof build source`:
#   - release build with full debuginfo, no stripping and frame pointers
#     (-C force-frame-pointers=yes), plus the project's jemalloc profiling feature when it
#     has one (devprof passes it in FEATURES);
#   - a runtime stage with perf, procps, binutils and the jemalloc tools (jeprof).
# devprof makes the build context: the source tree (without target/, profiling/, .git) and,
# under .devprof/skeleton/, the workspace's manifests and lock file with stub sources, so
# that the dependencies are compiled in a layer of their own that stays cached until a
# manifest or Cargo.lock changes (the classic builder has no cache mounts).
ARG RUST_IMAGE=rust:1-slim-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS builder
# make (jemalloc's build) and whatever else the project's build needs (BUILD_PACKAGES,
# Debian package names), installed only when missing.
ARG BUILD_PACKAGES=""
RUN set -e; need=""; \
    command -v make >/dev/null || need="make"; \
    command -v cc >/dev/null || need="$need gcc libc6-dev"; \
    need="$need $BUILD_PACKAGES"; \
    if [ -n "$(echo $need)" ]; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need \
      && rm -rf /var/lib/apt/lists/*; \
    fi

ARG PACKAGE
ARG BIN
ARG FEATURES=""
# Cargo's config environment wins over the profile in Cargo.toml.
ENV CARGO_PROFILE_RELEASE_DEBUG=full \
    CARGO_PROFILE_RELEASE_STRIP=none \
    CARGO_PROFILE_RELEASE_SPLIT_DEBUGINFO=off \
    CARGO_INCREMENTAL=0 \
    CARGO_TERM_COLOR=never \
    RUSTFLAGS="-C force-frame-pointers=yes"
WORKDIR /build

# 1. Dependencies only (cached until a manifest or the lock file changes). It fails, rather
#    than caching an empty layer, when cargo cannot fetch or build them.
COPY .devprof/skeleton/ /build/
RUN cargo build --release --locked -p "$PACKAGE" --bin "$BIN" --features "$FEATURES"

# 2. The program. Sources are touched so cargo does not take them for the stubs.
COPY . /build/
RUN find /build -path /build/target -prune -o -name '*.rs' -exec touch {} + \
 && cargo build --release --locked -p "$PACKAGE" --bin "$BIN" --features "$FEATURES" \
 && mkdir -p /out && cp "target/release/$BIN" /out/

FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      linux-perf procps binutils libjemalloc-dev \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /profiling
ARG BIN
COPY --from=builder /out/ /usr/local/bin/
ENV DEVPROF_BINARY=/usr/local/bin/${BIN}
# exec: the program replaces the shell (PID 1, or docker-init's child with `init: true`).
CMD ["/bin/sh", "-c", "exec \"$DEVPROF_BINARY\""]
