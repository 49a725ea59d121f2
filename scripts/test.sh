#!/usr/bin/env bash
# The whole test suite against the real Docker engine and the demo devnet. Set-up first
# (idempotent), then unit, golden-file and end-to-end tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
# Compile the tests before the capture tests run, not while they do.
cargo test --locked --workspace --no-run
# Few tests at a time: the capture tests share demo-seq and its two cores.
cargo test --locked --workspace -- --test-threads=3
