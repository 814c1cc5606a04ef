#!/usr/bin/env bash
# Removing work, measured: cache hits and dedupe joins against plain pass-through through the same Prism build,
# interleaved over rounds in one run, plus the upstream-call reduction of a bursty page-load scenario.
#
#   ROUNDS=3 DURATION=8 CONC=32 perf/reuse.sh        (SKIP_BUILD=1 to reuse target/release binaries)
#
# Targets (each a Prism with 1 shard pinned to CPU 0; oha and the upstream on CPU 1):
#   pass-through  eth_getTransactionReceipt with [cache] enabled=false, dedupe=false: every call goes upstream
#   cache-hit     the same call with the cache on: answered from the cache after the first
#   dedupe-join   eth_gasPrice (never cached) with dedupe on: concurrent identical calls share upstream calls
# Figures: closed-loop req/s and Prism CPU µs per request (from /proc); the ratios to pass-through are the result.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
CONC=${CONC:-32}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
WORK=$(mktemp -d /tmp/perfreuse.XXXXXX)
declare -a PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
log() { printf '[reuse %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
command -v oha >/dev/null || { log "installing oha (cargo install oha --locked)"; cargo install oha --locked >/dev/null 2>&1; }

if [[ -z "${SKIP_BUILD:-}" ]]; then
  (cd "$ROOT" && cargo build --release --bin prism --example fast_upstream >/dev/null 2>&1)
fi
BIN="$ROOT/target/release/prism"
UP_BIN="$ROOT/target/release/examples/fast_upstream"

UP=$(free_port)
taskset -c "$LOAD_CPU" "$UP_BIN" "127.0.0.1:$UP" >"$WORK/up.log" 2>&1 & PIDS+=($!)

start_prism() { # name port admin upstream_port cache_toml
  local name=$1 port=$2 admin=$3 up=$4 cache=$5
  cat >"$WORK/$name.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
shards = 1
pin_cores = false
[cache]
$cache
[[networks]]
name = "bench"
kind = "evm"
chain_id = 4663
  [[networks.providers]]
  name = "up"
  url = "http://127.0.0.1:$up"
TOML
  taskset -c "$PROXY_CPU" "$BIN" serve --config "$WORK/$name.toml" >"$WORK/$name.log" 2>&1 & PIDS+=($!)
  echo $! >"$WORK/$name.pid"
  for _ in $(seq 100); do
    curl -s -m 1 "http://127.0.0.1:$port/" -d '{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice"}' | grep -q result && return 0
    sleep 0.1
  done
  log "$name did not start"; cat "$WORK/$name.log"; exit 1
}
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

PLAIN=$(free_port); PLAIN_ADMIN=$(free_port)
REUSE=$(free_port); REUSE_ADMIN=$(free_port)
start_prism plain "$PLAIN" "$PLAIN_ADMIN" "$UP" $'enabled = false\ndedupe = false'
start_prism reuse "$REUSE" "$REUSE_ADMIN" "$UP" $'enabled = true\ndedupe = true'
RECEIPT='{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionReceipt","params":["0xabababababababababababababababababababababababababababababababab"]}'
GASPRICE='{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","params":[]}'
HZ=$(getconf CLK_TCK)

run() { # label port pid body
  local label=$1 port=$2 pid=$3 body=$4 t0 t1 out
  taskset -c "$LOAD_CPU" oha -z 1s -c "$CONC" --no-tui -m POST -H 'content-type: application/json' -d "$body" "http://127.0.0.1:$port/" >/dev/null 2>&1 || true
  t0=$(cpu_ticks "$pid")
  out=$(taskset -c "$LOAD_CPU" oha -z "${DURATION}s" -c "$CONC" --no-tui --output-format json -m POST -H 'content-type: application/json' -d "$body" "http://127.0.0.1:$port/")
  t1=$(cpu_ticks "$pid")
  python3 - "$label" "$t0" "$t1" "$HZ" <<PY "$out"
import json, sys
label, t0, t1, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
d = json.loads(sys.argv[5])
s = d["summary"]
ok = sum(v for k, v in d.get("statusCodeDistribution", {}).items() if k == "200")
print(json.dumps({"label": label, "rps": s["requestsPerSec"], "ok": ok, "cpu_us_per_req": (t1 - t0) / hz * 1e6 / max(ok, 1)}))
PY
}

: >"$WORK/results.jsonl"
for r in $(seq "$ROUNDS"); do
  log "round $r"
  run pass-through "$PLAIN" "$(cat "$WORK/plain.pid")" "$RECEIPT" >>"$WORK/results.jsonl"
  run cache-hit "$REUSE" "$(cat "$WORK/reuse.pid")" "$RECEIPT" >>"$WORK/results.jsonl"
  run dedupe-join "$REUSE" "$(cat "$WORK/reuse.pid")" "$GASPRICE" >>"$WORK/results.jsonl"
done

# Page loads against an upstream with a 30 ms service time, dedupe on vs off.
SLOW=$(free_port)
taskset -c "$LOAD_CPU" python3 "$ROOT/perf/slow_upstream.py" "$SLOW" 30 & PIDS+=($!)
sleep 0.5
PL_ON=$(free_port); PL_ON_ADMIN=$(free_port); PL_OFF=$(free_port); PL_OFF_ADMIN=$(free_port)
start_prism pageload-on "$PL_ON" "$PL_ON_ADMIN" "$SLOW" $'enabled = true\ndedupe = true'
start_prism pageload-off "$PL_OFF" "$PL_OFF_ADMIN" "$SLOW" $'enabled = false\ndedupe = false'
ON=$(python3 "$ROOT/perf/page_load.py" "http://127.0.0.1:$PL_ON/" "http://127.0.0.1:$PL_ON_ADMIN" 20 50 5)
OFF=$(python3 "$ROOT/perf/page_load.py" "http://127.0.0.1:$PL_OFF/" "http://127.0.0.1:$PL_OFF_ADMIN" 20 50 5)

python3 - "$WORK/results.jsonl" "$ON" "$OFF" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["label"], []).append(r)
med = lambda xs: statistics.median(xs)
base = by["pass-through"]
base_rps, base_cpu = med([r["rps"] for r in base]), med([r["cpu_us_per_req"] for r in base])
print(f"{'target':<14} {'req/s':>10} {'CPU µs/req':>11} {'rps ratio':>10} {'CPU ratio':>10}")
for label in ["pass-through", "cache-hit", "dedupe-join"]:
    rps = med([r["rps"] for r in by[label]]); cpu = med([r["cpu_us_per_req"] for r in by[label]])
    print(f"{label:<14} {rps:>10.0f} {cpu:>11.1f} {rps/base_rps:>9.2f}x {base_cpu/cpu:>9.2f}x")
on, off = json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"\npage loads (20 x 50 calls, 5 distinct per page, 30 ms upstream):")
print(f"  dedupe+cache on : {on['client_calls']} client calls -> {on['upstream_calls']} upstream calls ({on['reduction']}x fewer)")
print(f"  dedupe+cache off: {off['client_calls']} client calls -> {off['upstream_calls']} upstream calls ({off['reduction']}x)")
PY
