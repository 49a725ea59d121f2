#!/usr/bin/env bash
# Everything a fresh machine needs before devprof's demo or tests, idempotent:
# apt packages (debootstrap, docker-compose), a running Docker engine, the release build
# of devprof and the demo node, and the demo devnet (scripts/testbed-up.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { echo "setup: $*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

missing=()
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
command -v docker >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || missing+=(docker-compose)
# perf on the host: `devprof render FILE.data` uses it (the captures use the containers').
command -v perf >/dev/null || missing+=(linux-perf)
# The export and heatmap tests read devprof's files with the tools users open them in.
command -v go >/dev/null || missing+=(golang-go)
command -v chromium >/dev/null || missing+=(chromium)
# The engine tests: certificates made by openssl, and an sshd for ssh:// engines.
command -v openssl >/dev/null || missing+=(openssl)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
# The completion test runs the fish script in fish.
command -v fish >/dev/null || missing+=(fish)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin:/sbin"

if ! docker info >/dev/null 2>&1; then
  say "starting the Docker engine"
  as_root service docker start >/dev/null 2>&1 || as_root systemctl start docker >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup: error: the Docker engine does not answer" >&2; exit 1; }
fi

say "cargo build --release --locked"
cargo build --release --locked --workspace

scripts/testbed-up.sh
