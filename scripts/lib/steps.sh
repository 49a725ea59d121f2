# Sourced by the set-up scripts (demo.sh, setup.sh, testbed-up.sh, test.sh) after they cd
# to the repository: one clock for all of them, so every line tells the time since the
# first script started. Set STEPS_NAME before sourcing; `say` prefixes its lines with it.
export DEVPROF_T0_NS="${DEVPROF_T0_NS:-$(date +%s%N)}"

# [+S.Ds]: the time since DEVPROF_T0_NS.
stamp() {
  local ms=$((($(date +%s%N) - DEVPROF_T0_NS) / 1000000))
  printf '[+%d.%ds]' $((ms / 1000)) $((ms % 1000 / 100))
}
say() { echo "$STEPS_NAME $(stamp): $*"; }

# kill_tree PID: the process and what it started (a cargo build, a docker build).
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
