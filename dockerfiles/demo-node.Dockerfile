# The demo devnet node: the demo-node binary (built on the host with
# `cargo build --release -p demo-node`, frame pointers and full debuginfo) plus perf.
# Built by scripts/testbed-up.sh from a small temporary context (this file and the binary):
#   docker build --network host -f dockerfiles/demo-node.Dockerfile <context>
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

LABEL devprof.image=demo-node

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends linux-perf procps \
 && rm -rf /var/lib/apt/lists/*

RUN mkdir -p /data /profiling

COPY demo-node /usr/local/bin/demo-node

ENV DEMO_DATA_DIR=/data
CMD ["demo-node"]
