#!/usr/bin/env bash
# The whole test suite against the real Docker engine and the demo devnet. Set-up first
# (idempotent), then unit, golden-file and end-to-end tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
# The second container endpoint (Podman beside dockerd) for tests/podman.rs.
scripts/podman-up.sh
# Compile the tests before the capture tests run, not while they do.
cargo test --locked --workspace --no-run
# Every test runs: the pure ones, and those marked `#[ignore = "needs the demo devnet"]`
# (a plain `cargo test` lists those as ignored rather than reporting them as passed).
# Few tests at a time: the capture tests share demo-seq and its two cores.
cargo test --locked --workspace --no-fail-fast -- --include-ignored --test-threads=3
