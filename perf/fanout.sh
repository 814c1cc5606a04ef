#!/usr/bin/env bash
# WebSocket fan-out through Prism (issue 40): builds perf/fanout (a Rust tool in its own package, never built
# by CI) and runs it against a Prism binary. One process holds a fake EVM node that mines a block every
# 200 ms and the subscribers (epoll, not the bound); Prism runs one shard on core 1, the tool on core 0.
# Prints Prism's RSS per idle subscriber, its CPU per delivered notification, the latency from the node's
# write to each client and to the last client of each block, lost and duplicate notifications, and the
# tool's own CPU. perf/README.md has the before/after figures.
#
# usage: perf/fanout.sh [PRISM_BIN] [fanout options]      PRISM_BIN defaults to target/release/prism
#   perf/fanout.sh target/release/prism --heads 10000 --logs 1000
#   perf/fanout.sh target/release/prism --help           every option of the tool
#   SWEEP=1 perf/fanout.sh target/release/prism          the issue's points: 2 000 and 5 000 newHeads
#                                                        subscribers, 10 000 + 1 000 logs, then the same with
#                                                        100 slow clients; RUNS (2) runs of each, ~8 min
# environment:
#   QUIET_WAIT=120   before each run wait up to this many seconds for both cores to be idle (< 10 % busy for a
#                    second), so another build is not inside the measurement; 0 = don't wait
#   RUNS=2           runs per point with SWEEP=1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/target/release/prism}
shift || true
QUIET_WAIT=${QUIET_WAIT:-120}
RUNS=${RUNS:-2}
log() { echo "fanout.sh: $*" >&2; }

[[ -x "$BIN" ]] || { log "no Prism binary at $BIN (cargo build --release)"; exit 1; }
cargo build --release --quiet --manifest-path "$ROOT/perf/fanout/Cargo.toml"
TOOL=$ROOT/perf/fanout/target/release/fanout

busy() { # busy ticks (user nice system irq softirq) of cpu0 and cpu1
  awk '$1 == "cpu0" || $1 == "cpu1" { t[$1] = $2 + $3 + $4 + $7 + $8 } END { print t["cpu0"] + 0, t["cpu1"] + 0 }' /proc/stat
}
wait_quiet() {
  ((QUIET_WAIT > 0)) || return 0
  local deadline=$((SECONDS + QUIET_WAIT)) hz a0 b0 a1 b1 said=""
  hz=$(getconf CLK_TCK)
  while :; do
    read -r a0 b0 < <(busy)
    sleep 1
    read -r a1 b1 < <(busy)
    if (((a1 - a0) * 10 <= hz && (b1 - b0) * 10 <= hz)); then return 0; fi
    if ((SECONDS >= deadline)); then log "warning: cores still busy ($((a1 - a0)), $((b1 - b0)) ticks/s); measuring anyway"; return 0; fi
    [[ -n "$said" ]] || { log "waiting for the cores to go quiet ($((a1 - a0)), $((b1 - b0)) ticks/s busy)"; said=1; }
  done
}

run() {
  wait_quiet
  log "fanout $*"
  "$TOOL" "$BIN" "$@"
  echo
}

if [[ "${SWEEP:-0}" == 1 ]]; then
  for ((r = 1; r <= RUNS; r++)); do
    run --heads 2000 --logs 0 "$@"
    run --heads 5000 --logs 0 "$@"
    run --heads 10000 --logs 1000 "$@"
    run --heads 10000 --logs 1000 --slow 100 "$@"
  done
else
  run "$@"
fi
