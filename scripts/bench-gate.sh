#!/usr/bin/env bash
# The regression gate's A/A and A/B experiments (docs/regression-gate.md).
#
# A/A: REPS times, two capture sets of demo-seq (K windows of WINDOW_S s each), diffed:
#      how many diffs flag any function as regressed (goal: at most 1 in 20).
# A/B: two containers of their own from the demo image (bench-gate-base-*, bench-gate-head-*;
#      never demo-seq), both making CALLS hash_chain calls per 100 ms period: the head's
#      calls do HEAD_ROUNDS passes over the buffer instead of BASE_ROUNDS (the node's
#      DEMO_HASH_CALLS and DEMO_HASH_ROUNDS: the same calls, each heavier, as a regression
#      in one function is); REPS times a set of each, diffed with
#      --fail-if "$AB_FAIL_IF" (hash_chain's samples per second up by more than 20%): how
#      often hash_chain is flagged and --fail-if exits 10, and which other functions are
#      flagged.
#
# Settings: REPS (20), K (5), WINDOW_S (2), CALLS (45: about 20% of a core at 2 rounds), BASE_ROUNDS (2), HEAD_ROUNDS (3),
# AB_FAIL_IF (self(hash_chain) > +20%), DEVPROF (target/debug/devprof), ONLY (aa|ab: one
# experiment). Needs jq.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-20}
K=${K:-5}
WINDOW_S=${WINDOW_S:-2}
CALLS=${CALLS:-45}
BASE_ROUNDS=${BASE_ROUNDS:-2}
HEAD_ROUNDS=${HEAD_ROUNDS:-3}
DEVPROF=${DEVPROF:-target/debug/devprof}
IMAGE=${DEVPROF_DEMO_IMAGE:-devprof-demo-node:latest}
ONLY=${ONLY:-}
HASH=demo_node::workloads::hash_chain
AB_FAIL_IF=${AB_FAIL_IF:-"self($HASH) > +20%"}
OUT=$(mktemp -d /tmp/bench-gate.XXXXXX)
BASE=bench-gate-base-$$
HEAD=bench-gate-head-$$
cleanup() {
    docker rm -f "$BASE" "$HEAD" >/dev/null 2>&1 || true
    rm -rf "$OUT"
}
trap cleanup EXIT
export DEVPROF_OUTPUT_DIR="$OUT/profiling"
window=$((K * WINDOW_S))

set_of() { # container -> manifest of a capture set
    "$DEVPROF" cpu "$1" "${window}s" --repeat "$K" --json 2>"$OUT/cpu.err" | jq -r .manifest
}

# diff BEFORE AFTER [--fail-if EXPR] -> "exit-code<TAB>regressed names<TAB>improved names"
diff_sets() {
    local code=0
    "$DEVPROF" diff "$1" "$2" -o "$OUT/diff.svg" --json "${@:3}" >"$OUT/diff.json" 2>"$OUT/diff.err" || code=$?
    if [ "$code" != 0 ] && [ "$code" != 10 ]; then
        cat "$OUT/diff.err" >&2
        exit 1
    fi
    printf '%s\t%s\t%s\n' "$code" \
        "$(jq -r '[.comparison.functions[] | select(.verdict=="regressed") | .name] | join(",")' "$OUT/diff.json")" \
        "$(jq -r '[.comparison.functions[] | select(.verdict=="improved") | .name] | join(",")' "$OUT/diff.json")"
}

if [ "$ONLY" != ab ]; then
    echo "A/A: demo-seq, $REPS repetitions of two sets of $K windows of ${WINDOW_S} s"
    flagged=0
    for i in $(seq 1 "$REPS"); do
        a=$(set_of demo-seq)
        b=$(set_of demo-seq)
        IFS=$'\t' read -r code regressed improved < <(diff_sets "$a" "$b" --fail-if 'any > +0pp')
        [ -n "$regressed" ] && flagged=$((flagged + 1))
        echo "  $i: exit $code; regressed: ${regressed:-none}; improved: ${improved:-none}"
        rm -rf "$OUT/profiling"
    done
    echo "A/A: $flagged of $REPS diffs flag a function as regressed"
fi

if [ "$ONLY" != aa ]; then
    rights=(--cap-add SYS_ADMIN --cap-add SYS_PTRACE --cap-add SYSLOG --cap-add IPC_LOCK
        --security-opt seccomp=unconfined --init)
    workloads=(-e DEMO_WORKLOADS="hash_chain:95,state_lookup:15" -e DEMO_HASH_CALLS="$CALLS")
    docker run -d --name "$BASE" "${rights[@]}" "${workloads[@]}" \
        -e DEMO_HASH_ROUNDS="$BASE_ROUNDS" "$IMAGE" >/dev/null
    docker run -d --name "$HEAD" "${rights[@]}" "${workloads[@]}" \
        -e DEMO_HASH_ROUNDS="$HEAD_ROUNDS" "$IMAGE" >/dev/null
    sleep 3
    echo "A/B: hash_chain, $CALLS calls per 100 ms, $BASE_ROUNDS -> $HEAD_ROUNDS rounds per call, $REPS repetitions of $K windows of ${WINDOW_S} s"
    hits=0
    trips=0
    for i in $(seq 1 "$REPS"); do
        a=$(set_of "$BASE")
        b=$(set_of "$HEAD")
        IFS=$'\t' read -r code regressed improved < <(diff_sets "$a" "$b" --fail-if "$AB_FAIL_IF")
        case ",$regressed," in *",$HASH,"*) hits=$((hits + 1)) ;; esac
        [ "$code" = 10 ] && trips=$((trips + 1))
        echo "  $i: exit $code; regressed: ${regressed:-none}; improved: ${improved:-none}"
        rm -rf "$OUT/profiling"
    done
    echo "A/B: hash_chain flagged in $hits of $REPS; --fail-if '$AB_FAIL_IF' exited 10 in $trips of $REPS"
fi
