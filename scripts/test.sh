#!/usr/bin/env bash
# The whole test suite against the real Docker engine and the demo devnet. Set-up first
# (idempotent), then unit, golden-file and end-to-end tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
# Compile the tests before the capture tests run, not while they do.
cargo test --locked --workspace --no-run
# Tests that need the devnet and found none list themselves here (never under CI=true,
# where they fail instead); the count is printed so a local skip is not read as a pass.
not_run="${CARGO_TARGET_DIR:-target}/tmp/devprof-not-run.txt"
rm -f "$not_run"
# Few tests at a time: the capture tests share demo-seq and its two cores.
cargo test --locked --workspace -- --test-threads=3
if [ -s "$not_run" ]; then
  echo "test.sh: $(sort -u "$not_run" | wc -l) test(s) NOT RUN (no Docker engine or demo devnet): $(sort -u "$not_run" | tr '\n' ' ')" >&2
else
  echo "test.sh: every test ran"
fi
