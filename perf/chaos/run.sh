#!/usr/bin/env bash
# The longer chaos run: the scenarios of tests/chaos.rs with each fault held FAULT_MS (default 10000),
# printing the table and writing it to perf/chaos/RESULTS.md.
#   perf/chaos/run.sh [FAULT_MS]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/deps/evm.sh
if [ "$(ulimit -l)" != "unlimited" ] && [ "$(ulimit -l)" -lt 8192 ]; then
  ulimit -l 8192 2>/dev/null || echo "warning: ulimit -l is $(ulimit -l) KiB; glommio may refuse to start" >&2
fi
export CHAOS_FAULT_MS="${1:-${FAULT_MS:-10000}}"
export PRISM_CHAOS_RESULTS="$PWD/perf/chaos/RESULTS.md"
cargo test --test chaos chaos_suite -- --nocapture --test-threads=1
echo "== wrote $PRISM_CHAOS_RESULTS"
