# The JVM demo (demo/jvm/DemoJvm.java) on Debian's OpenJDK 17, with the profilers devprof
# uses on a JVM: async-profiler (release layout under /opt/async-profiler: bin/asprof,
# lib/libasyncProfiler.so), perf (linux-perf) and jcmd (for `jcmd PID Compiler.perfmap`).
# Built by scripts/runtime-images.sh from a context holding this file as Dockerfile,
# DemoJvm.java and async-profiler-src.tar.gz (no registry offers async-profiler
# binaries on the test bed, so it is built from source here).
#
# -XX:+PreserveFramePointer is deliberately NOT set: compose passes it through
# JAVA_TOOL_OPTIONS, and tests also need a JVM without it.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      g++ make openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY async-profiler-src.tar.gz DemoJvm.java ./
# JAVA_HOME differs per architecture (java-17-openjdk-amd64, -arm64): take it from javac.
RUN set -e; \
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"; \
    mkdir async-profiler && tar xzf async-profiler-src.tar.gz -C async-profiler --strip-components=1; \
    cd async-profiler; \
    mkdir -p build/lib build/bin; \
    make JAVA_HOME="$JAVA_HOME" build/lib/libasyncProfiler.so build/bin/asprof -j2; \
    mkdir -p /out/async-profiler/bin /out/async-profiler/lib /out/app; \
    cp build/bin/asprof /out/async-profiler/bin/; \
    cp build/lib/libasyncProfiler.so /out/async-profiler/lib/; \
    # Release tarballs ship the library without debug info (5 MB -> under 1 MB).
    strip -g /out/async-profiler/lib/libasyncProfiler.so; \
    cp LICENSE /out/async-profiler/; \
    javac -d /out/app /src/DemoJvm.java

FROM ${BASE_IMAGE}
LABEL devprof.image=demo-jvm
# openjdk-17-jdk-headless (not -jre-headless): jcmd ships only with the JDK.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      openjdk-17-jdk-headless linux-perf procps \
 && rm -rf /var/lib/apt/lists/* /tmp/* \
 && command -v jcmd >/dev/null \
 && useradd --uid 1000 --user-group --create-home --shell /bin/sh app
COPY --from=build /out/async-profiler /opt/async-profiler
COPY --from=build /out/app /app
USER app
WORKDIR /home/app
# Exec form: java itself is the container's main process (PID 1, or the child of
# docker-init under compose's `init: true`) and gets the stop signal directly. The heap
# is capped and the serial collector keeps the thread list short; the demo needs little.
CMD ["java", "-Xmx64m", "-XX:+UseSerialGC", "-cp", "/app", "DemoJvm"]
