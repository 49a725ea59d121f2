# The profiler (sidecar) image: perf, procps and binutils for native and JIT profiling,
# and py-spy for Python. It is started next to a target container, sharing its pid
# namespace (--pid container:NAME), so no profiling tool has to be in the target.
# py-spy is a static binary taken from its PyPI wheel on the host (scripts/runtime-images.sh
# puts it into the build context as ./py-spy), so no package index is needed here.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
LABEL devprof.image=profiler
RUN set -e; apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      linux-perf procps binutils curl ca-certificates; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /profiling
COPY py-spy /usr/local/bin/py-spy
RUN py-spy --version
CMD ["bash"]
