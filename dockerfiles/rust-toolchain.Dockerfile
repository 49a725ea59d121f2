# A Rust toolchain image for `devprof build source` where none can be pulled: the local
# Debian base, a C toolchain (the linker; -sys crates such as jemalloc's build C code) and
# the host's own rustup toolchain (rustc, cargo, the standard library of the host target),
# which scripts/rust-image.sh puts into the build context under toolchain/, with the
# host's CA certificates.
# Laid out like the official rust images: cargo on PATH, CARGO_HOME=/usr/local/cargo.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

LABEL devprof.image=rust-toolchain

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev make ca-certificates \
 && rm -rf /var/lib/apt/lists/*

COPY toolchain/ /usr/local/rust/

# The host's trust store (scripts/rust-image.sh puts it into the context; empty when the
# host has none), so that cargo reaches crates.io through the same TLS proxies as the host.
COPY host-ca-certificates.crt /tmp/host-ca-certificates.crt
RUN if [ -s /tmp/host-ca-certificates.crt ]; then \
      cp /tmp/host-ca-certificates.crt /etc/ssl/certs/ca-certificates.crt; \
    fi; rm -f /tmp/host-ca-certificates.crt

ENV CARGO_HOME=/usr/local/cargo \
    CARGO_HTTP_CAINFO=/etc/ssl/certs/ca-certificates.crt \
    PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

RUN mkdir -p "$CARGO_HOME/bin" && rustc --version && cargo --version
