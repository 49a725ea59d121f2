# The demo node as most devnet containers are: no perf, no profiling tools. Used to test
# sidecar profiling (the container is started with no added capabilities and Docker's
# default seccomp profile). Built by scripts/testbed-up.sh from a context holding only
# this file and the demo-node binary.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
LABEL devprof.image=demo-plain
COPY demo-node /usr/local/bin/demo-node
CMD ["demo-node"]
