#!/usr/bin/env bash
# The whole test suite against the real Docker engine and the demo devnet, from a fresh
# machine: the machine's set-up, then the test bed (in the background) while the tests
# compile, then Podman beside dockerd, then every test: the pure ones and those marked
# `#[ignore = "needs the demo devnet"]` (a plain `cargo test` lists those as ignored
# rather than reporting them as passed). With cargo-nextest installed the tests run as
# .config/nextest.toml orders them (profile ci: per-test times in
# target/nextest/ci/junit.xml); without it, `cargo test` runs one test binary at a time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
STEPS_NAME=test
. scripts/lib/steps.sh
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

scripts/setup.sh tests
say "scripts/testbed-up.sh all (in the background; its lines are prefixed)"
scripts/testbed-up.sh all > >(sed -u 's/^/  | /') 2>&1 &
testbed=$!
# A failed test build or a Ctrl-C before the wait below must not leave the test bed
# coming up behind the teardown.
trap 'kill_tree "$testbed"' EXIT

# The demo node and the hostile service are built in release by the test bed (their
# images run them); their unit tests reuse that build below, the rest compile here once.
SUITE=(--workspace --exclude demo-node --exclude demo-hostile)
nextest=
cargo nextest --version >/dev/null 2>&1 && nextest=1
say "compiling the tests"
if [ -n "$nextest" ]; then
  cargo nextest run --locked "${SUITE[@]}" --no-run
else
  cargo test --locked "${SUITE[@]}" --no-run
fi
say "tests compiled; waiting for the test bed"
wait "$testbed" || { echo "test: error: the test bed did not come up" >&2; exit 1; }
trap - EXIT
# devprof runs sidecars only from a profiler image it trusts (docs/security.md); the test
# bed built this one with docker build, so it is named to devprof here, on each endpoint.
export DEVPROF_BIN="${CARGO_TARGET_DIR:-target}/debug/devprof"
PROFILER_IMAGE="${DEVPROF_PROFILER_IMAGE:-devprof-profiler:latest}"
"$DEVPROF_BIN" trust "$PROFILER_IMAGE"
# The second container endpoint (Podman beside dockerd) for tests/podman.rs.
scripts/podman-up.sh
say "running the tests"
status=0
if [ -n "$nextest" ]; then
  cargo nextest run --locked "${SUITE[@]}" --profile ci --run-ignored all || status=$?
  # nextest runs no doctests.
  cargo test --locked "${SUITE[@]}" --doc || status=$?
else
  # One binary at a time, a few tests at once: the capture tests share demo-seq and its
  # two cores.
  cargo test --locked "${SUITE[@]}" --no-fail-fast -- --include-ignored --test-threads=3 || status=$?
fi
# The demo programs' unit tests, on the test bed's release build.
cargo test --locked --release -p demo-node -p demo-hostile || status=$?
say "done (exit $status)"
exit "$status"
