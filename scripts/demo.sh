#!/usr/bin/env bash
# The main job on the demo devnet, from a fresh machine: install what is missing, build
# devprof (the release binary `cargo install` gives) and the demo node, start demo-seq,
# then record a CPU flamegraph of it. Each set-up line carries the time since the start.
# Usage: scripts/demo.sh [DURATION]   (default 10s)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
STEPS_NAME=demo
. scripts/lib/steps.sh
scripts/setup.sh demo
scripts/testbed-up.sh demo
say "devprof cpu demo-seq ${1:-10s}"
echo
exec "${CARGO_TARGET_DIR:-target}/release/devprof" cpu demo-seq "${1:-10s}"
