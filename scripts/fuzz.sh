#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a fixed budget and prints the executions of each.
#
#   scripts/fuzz.sh [seconds-per-target] [target ...]     (default 60 s, every target)
#
# Not part of scripts/test.sh: too slow for CI. Needs cargo-fuzz (`cargo install cargo-fuzz --locked`);
# nightly-only flags are enabled on the stable toolchain with RUSTC_BOOTSTRAP=1. Each run starts from the
# committed seeds in fuzz/corpus/<target>/ plus what earlier runs found (fuzz/target/corpus/<target>/,
# ignored by git), so the committed corpus stays small. A crashing input is copied to
# fuzz/crashes/<target>/ and the script exits 1 after the remaining targets ran.
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${1:-60}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(envelope http_head solana_tx upstream_answer sub_frame solana_account envelope_cost)
fi
PER_INPUT_TIMEOUT=${FUZZ_INPUT_TIMEOUT:-10}
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz missing: cargo install cargo-fuzz --locked" >&2
    exit 2
fi

status=0
summary=()
mkdir -p "$ROOT/fuzz/target" # on a fresh clone nothing has built there yet: the build logs go in it
for t in "${TARGETS[@]}"; do
    if [ "$t" = solana_tx ] && [ ! -f crates/solana/src/tx.rs ]; then
        summary+=("$t: skipped (crates/solana/src/tx.rs not there yet)")
        continue
    fi
    echo "== $t: building" >&2
    if ! (cd fuzz && cargo fuzz build "$t") >"$ROOT/fuzz/target/build-$t.log" 2>&1; then
        tail -30 "$ROOT/fuzz/target/build-$t.log" >&2
        summary+=("$t: BUILD FAILED (fuzz/target/build-$t.log)")
        status=1
        continue
    fi
    work="$ROOT/fuzz/target/corpus/$t"
    seeds="$ROOT/fuzz/corpus/$t"
    mkdir -p "$work" "$seeds" "$ROOT/fuzz/artifacts/$t"
    log="$ROOT/fuzz/target/run-$t.log"
    echo "== $t: fuzzing for ${SECS}s" >&2
    (cd fuzz && cargo fuzz run "$t" "$work" "$seeds" -- \
        -max_total_time="$SECS" -timeout="$PER_INPUT_TIMEOUT" -rss_limit_mb=4096 -max_len=65536 \
        -print_final_stats=1) >"$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    if [ -z "$execs" ]; then
        execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    fi
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
    crashes=$(grep -oE "(crash|leak|timeout|oom|slow-unit)-[0-9a-f]+" "$log" | sort -u)
    if [ $rc -ne 0 ] || [ -n "$crashes" ]; then
        mkdir -p "$ROOT/fuzz/crashes/$t"
        for a in $crashes; do
            [ -f "$ROOT/fuzz/artifacts/$t/$a" ] && cp "$ROOT/fuzz/artifacts/$t/$a" "$ROOT/fuzz/crashes/$t/"
        done
        grep -m1 -B2 -A25 -E "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" >&2
        summary+=("$t: FAILED rc=$rc after ${execs:-?} executions; inputs in fuzz/crashes/$t/: ${crashes:-none}; log $log")
        status=1
    else
        summary+=("$t: ${execs:-?} executions in ${SECS}s, ${cov:-cov: ?}, no crash")
    fi
done

echo "fuzz summary (${SECS}s per target, -timeout=${PER_INPUT_TIMEOUT}s per input):"
for line in "${summary[@]}"; do
    echo "  $line"
done
exit $status
