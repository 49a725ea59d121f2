# The Node.js test bed: Debian's nodejs running demo/js/busy.js, with perf and procps in
# the image so that exec-mode profiling (perf inside the container) can be tested.
# NODE_OPTIONS=--perf-basic-prof is deliberately not set here: compose sets it, and the
# tests also need the same image running a node without it. Built from the context
# demo/js (scripts/runtime-images.sh).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
LABEL devprof.image=demo-js
RUN set -e; apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs linux-perf procps; \
    rm -rf /var/lib/apt/lists/*; \
    useradd --system --create-home --home-dir /home/app --uid 10001 --user-group app
COPY busy.js /app/busy.js
WORKDIR /app
USER app
CMD ["node", "/app/busy.js"]
