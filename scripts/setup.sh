#!/usr/bin/env bash
# The machine's part of the set-up, idempotent: the apt packages a mode needs and a running
# Docker engine. The images, binaries and containers are scripts/testbed-up.sh's.
#
#   scripts/setup.sh demo    what scripts/demo.sh needs: docker, docker-compose
#                            (debootstrap comes with the base image, when it must be made)
#   scripts/setup.sh tests   also debootstrap, perf on the host, Go, Chromium, openssl,
#                            openssh and fish (Podman comes with scripts/podman-up.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODE="${1:-tests}"
case "$MODE" in demo | tests) ;; *) echo "usage: scripts/setup.sh [demo|tests]" >&2; exit 2 ;; esac

STEPS_NAME=setup
. scripts/lib/steps.sh
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

missing=()
command -v docker >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || missing+=(docker-compose)
if [ "$MODE" = tests ]; then
  # perf on the host: `devprof render FILE.data` uses it (the captures use the containers').
  command -v perf >/dev/null || missing+=(linux-perf)
  # The base image, when it cannot be pulled.
  command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
  # The export and heatmap tests read devprof's files with the tools users open them in.
  command -v go >/dev/null || missing+=(golang-go)
  command -v chromium >/dev/null || missing+=(chromium)
  # The engine tests: certificates made by openssl, and an sshd for ssh:// engines.
  command -v openssl >/dev/null || missing+=(openssl)
  command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  # The completion test runs the fish script in fish.
  command -v fish >/dev/null || missing+=(fish)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  say "apt-get install ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  say "starting the Docker engine"
  as_root service docker start >/dev/null 2>&1 || as_root systemctl start docker >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup: error: the Docker engine does not answer" >&2; exit 1; }
fi
say "machine ready ($MODE)"
