# The Go workload of the test bed (demo/go): a stripped Go binary (-trimpath
# -ldflags="-s -w": no ELF symbol table, no DWARF; .gopclntab stays), so devprof has to
# name its frames from .gopclntab, with perf and procps in the image so that perf can be
# run inside the container (exec mode). net/http/pprof listens on 127.0.0.1:6060 only.
# Built by scripts/runtime-images.sh from a context holding this file and demo/go.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends golang-go \
 && rm -rf /var/lib/apt/lists/*
# No dependencies and no module proxy: resolve nothing from the network. CGO off: a
# static, internally linked, non-PIE binary, as most Go services ship.
ENV GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
# Compile the standard packages the program uses in a layer of their own (into the build
# cache), so that a change to main.go recompiles only package main.
RUN mkdir /warm && cd /warm \
 && printf 'module warm\n' >go.mod \
 && printf 'package main\nimport (\n_ "log"\n_ "net/http"\n_ "net/http/pprof"\n_ "os/signal"\n_ "strconv"\n)\nfunc main() {}\n' >main.go \
 && go build -trimpath -ldflags="-s -w" -o /dev/null . && cd / && rm -rf /warm
WORKDIR /src
COPY go.mod main.go ./
RUN go build -trimpath -ldflags="-s -w" -o /out/demo-go .

FROM ${BASE_IMAGE}
LABEL devprof.image=demo-go
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends linux-perf procps \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin demo
COPY --from=build /out/demo-go /usr/local/bin/demo-go
USER demo
CMD ["demo-go"]
