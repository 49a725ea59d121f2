# The demo node's image (scripts/testbed-up.sh): the host-built demo-node binary
# (release, full debuginfo, frame pointers, jemalloc profiling) on the local Debian base
# with what devprof uses inside a profiling image: perf, procps, binutils and jemalloc's
# tools (jeprof). The `runtime` stage is built ahead, while the binary compiles; the
# context then holds only this file and the binary.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      linux-perf procps binutils libjemalloc-dev \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /profiling

FROM runtime
# The labels `devprof build source` gives the image it makes of the same program with the
# same flags (frame pointers, full debuginfo): `devprof compose` picks services by them.
LABEL devprof.profiling=source devprof.image=demo-node devprof.package=demo-node \
      devprof.binary=/usr/local/bin/demo-node devprof.features=""
COPY demo-node /usr/local/bin/demo-node
ENV DEVPROF_BINARY=/usr/local/bin/demo-node
# exec: the program replaces the shell (PID 1, or docker-init's child with `init: true`).
CMD ["/bin/sh", "-c", "exec \"$DEVPROF_BINARY\""]
