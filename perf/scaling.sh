#!/usr/bin/env bash
# Shard scaling on a many-core machine: perf/compare.sh once per shard count, the proxies (Prism with N shards,
# nginx with N workers) on cores 0..N-1 and the generator and upstream on the cores after them, with the load
# scaled to N (closed-loop connections 32 x N, fixed rate 5000 x N). Prints each run's table, then one line per
# N: closed-loop req/s and CPU per request for nginx and Prism, and Prism's req/s against its own 1-shard run.
#
# Usage: perf/scaling.sh                 (SHARD_LIST="1 2 4 8", needs 2 x the largest N cores)
#   SHARD_LIST="1 2 4"  ROUNDS=2  DURATION=8   TARGETS="direct nginx prism"   (other compare.sh knobs pass through)
# On a 2-core machine only SHARD_LIST=1 fits this layout; the 2-shard run there is compare.sh with
# SHARDS=2 PROXY_CPU=0,1 LOAD_CPU=0,1 (the generator shares the cores: read CPU per request, not throughput).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARD_LIST=${SHARD_LIST:-"1 2 4 8"}
CORES=$(nproc)
OUT=$(mktemp -d /tmp/scaling.XXXXXX)
export ROUNDS=${ROUNDS:-2} DURATION=${DURATION:-8} TARGETS=${TARGETS:-"direct nginx prism"}
built=""
for n in $SHARD_LIST; do
  if ((2 * n > CORES)); then echo "skipping $n shards: needs $((2 * n)) cores, this machine has $CORES" >&2; continue; fi
  load_hi=$((CORES - 1))
  ((load_hi >= 4 * n - 1)) && load_hi=$((4 * n - 1)) # at most 3 generator cores per proxy core
  SHARDS=$n PROXY_CPU="0-$((n - 1))" LOAD_CPU="$n-$load_hi" CLOSED_CONC=$((32 * n)) FIXED_CONC=$((16 * n)) \
    RATE=$((5000 * n)) SKIP_BUILD=$built "$ROOT/perf/compare.sh" | tee "$OUT/shards-$n.txt"
  built=1
done
echo
echo "shards  nginx req/s  nginx CPU/req µs  prism req/s  prism CPU/req µs  prism vs its 1-shard req/s"
base=""
for n in $SHARD_LIST; do
  f="$OUT/shards-$n.txt"
  [[ -f $f ]] || continue
  # Table columns: target p50 p99 +p50 +p99 rate CPU@rate CPUclosed sysc core closed ...
  read -r ng_rps ng_cpu < <(awk '$1 == "nginx" { print $11, $8 }' "$f")
  read -r pr_rps pr_cpu < <(awk '$1 == "prism" { print $11, $8 }' "$f")
  [[ -n "$base" ]] || base=$pr_rps
  printf '%6s %12s %17s %12s %17s %27s\n' "$n" "${ng_rps:--}" "${ng_cpu:--}" "${pr_rps:--}" "${pr_cpu:--}" \
    "$(python3 -c "print(f'{float(\"${pr_rps:-0}\") / float(\"${base:-1}\"):.2f}x')" 2>/dev/null || echo -)"
done
echo "(tables in $OUT)"
