#!/usr/bin/env bash
# The main job on the demo devnet: set everything up, then record a CPU flamegraph of
# demo-seq. Usage: scripts/demo.sh [DURATION]   (default 10s)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
echo
exec target/release/devprof cpu demo-seq "${1:-10s}"
