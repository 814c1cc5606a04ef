#!/usr/bin/env bash
# User and kernel CPU per forwarded request for one proxy, closed loop (or RATE=N) with distinct requests, and
# optionally a `perf record -e cpu-clock -g` of it: where the CPU per request goes, user space or the
# kernel, and in the kernel which paths. compare.sh gives the totals; this splits them. See perf/README.md.
#
# Usage: perf/split.sh TARGET      TARGET: prism (dedupe and cache off), prismon (Prism's defaults: dedupe
#                                  and cache on), floor, or nginx
#   DURATION=8   seconds measured (after 2 s of warm-up)
#   RATE=5000    a fixed rate (oha -q, 16 connections, latency correction) instead of the closed loop
#   RECORD=1     also perf record the proxy while it is measured (then its figures carry perf's overhead:
#                compare targets with RECORD set the same way); the data file is printed at the end
#   PRISM_BIN=path   default target/release/prism; FLOOR_BIN as in compare.sh
# Needs the builds compare.sh makes (SKIP_BUILD=1 perf/compare.sh uses the same ones) and oha.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${1:?usage: perf/split.sh prism|prismon|floor|nginx}
DURATION=${DURATION:-8}
PRISM_BIN=${PRISM_BIN:-$ROOT/target/release/prism}
FLOOR_BIN=${FLOOR_BIN:-$ROOT/target/release/examples/floor_forwarder}
UPSTREAM_BIN=$ROOT/target/perf/fast_upstream
OHA=$(command -v oha || echo "$HOME/.cargo/bin/oha")
# shellcheck source=perf/bench_config.sh
. "$ROOT/perf/bench_config.sh"
[[ -x "$UPSTREAM_BIN" ]] || { echo "missing $UPSTREAM_BIN: run perf/compare.sh once (it builds it)" >&2; exit 1; }

# No "prism" in any path or process name (see compare.sh).
WORK=$(mktemp -d /tmp/perfsplit.XXXXXX)
declare -a STARTED=()
cleanup() {
  for pid in "${STARTED[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ready() { # url
  for _ in $(seq 100); do
    curl -s -m 1 -X POST -H 'content-type: application/json' \
      -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' "$1" | grep -q '"result"' && return 0
    sleep 0.1
  done
  echo "no answer at $1" >&2
  exit 1
}

python3 - "$WORK/bodies.txt" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(1, 200001):
        f.write('{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x%040x","latest"]}\n' % (i, i * 2654435761))
PY

UP=$(free_port) PORT=$(free_port)
taskset -c 1 "$UPSTREAM_BIN" "127.0.0.1:$UP" 4663 >"$WORK/upstream.log" 2>&1 &
STARTED+=($!)
ready "http://127.0.0.1:$UP/"

case $TARGET in
prism | prismon)
  cp "$PRISM_BIN" "$WORK/rpc-proxy"
  passthrough=1
  [[ $TARGET == prismon ]] && passthrough=0
  bench_config "127.0.0.1:$PORT" "127.0.0.1:$(free_port)" "http://127.0.0.1:$UP" 1 "$passthrough" >"$WORK/config.toml"
  taskset -c 0 "$WORK/rpc-proxy" serve --config "$WORK/config.toml" >"$WORK/proxy.log" 2>&1 &
  STARTED+=($!)
  PID=$!
  ;;
floor)
  cp "$FLOOR_BIN" "$WORK/forwarder"
  taskset -c 0 "$WORK/forwarder" "127.0.0.1:$PORT" "127.0.0.1:$UP" >"$WORK/proxy.log" 2>&1 &
  STARTED+=($!)
  PID=$!
  ;;
nginx)
  mkdir -p "$WORK/logs" "$WORK/tmp"
  cat >"$WORK/nginx.conf" <<EOF
worker_processes 1; daemon off; master_process on; user root; pid $WORK/nginx.pid;
error_log $WORK/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off; client_body_temp_path $WORK/tmp/b; proxy_temp_path $WORK/tmp/p;
  fastcgi_temp_path $WORK/tmp/f; uwsgi_temp_path $WORK/tmp/u; scgi_temp_path $WORK/tmp/s;
  keepalive_requests 1000000; keepalive_timeout 75s;
  upstream fast { server 127.0.0.1:$UP; keepalive 64; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$PORT; location / { proxy_pass http://fast; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
EOF
  taskset -c 0 "$(command -v nginx || echo /usr/sbin/nginx)" -p "$WORK" -c "$WORK/nginx.conf" >"$WORK/proxy.log" 2>&1 &
  STARTED+=($!)
  ready "http://127.0.0.1:$PORT/"
  PID=$(pgrep -P "${STARTED[-1]}" | head -1) # the worker
  ;;
*) echo "unknown target $TARGET" >&2; exit 1 ;;
esac
ready "http://127.0.0.1:$PORT/"

LOAD_SHAPE=(-c 32)
[[ -n "${RATE:-}" ]] && LOAD_SHAPE=(-c 16 -q "$RATE" --latency-correction)
taskset -c 1 "$OHA" --no-tui -z "$((DURATION + 3))s" "${LOAD_SHAPE[@]}" -m POST -H 'content-type: application/json' \
  -Z "$WORK/bodies.txt" --output-format json "http://127.0.0.1:$PORT/" >"$WORK/oha.json" 2>/dev/null &
LOAD=$!
sleep 2
# CPU over the measured window; requests over it from the run's mean rate (the load is steady).
ticks() { awk '{print $14, $15}' "/proc/$PID/stat"; } # utime stime
# Loopback TCP segments sent by anyone (client, proxy, upstream) over the window: the kernel's share of a
# request is mostly its segments' trip through the TCP stack, so equal counts mean equal kernel work there.
segs() { nstat -az TcpOutSegs 2>/dev/null | awk '$1 == "TcpOutSegs" {print $2}'; }
segs0=$(segs)
before=$(ticks)
if [[ -n "${RECORD:-}" ]]; then
  perf record -q -e cpu-clock -F 4000 -g -p "$PID" -o "$ROOT/target/perf/split-$TARGET.data" -- sleep "$DURATION" 2>/dev/null
else
  sleep "$DURATION"
fi
after=$(ticks)
segs1=$(segs)
wait "$LOAD"
python3 - "$before" "$after" "$WORK/oha.json" "$DURATION" "$TARGET" "$(getconf CLK_TCK)" "${segs0:-0}" "${segs1:-0}" \
  ${RATE:+"$RATE"} <<'PY'
import json, sys
(u0, s0), (u1, s1) = (map(int, sys.argv[1].split()), map(int, sys.argv[2].split()))
rps = json.load(open(sys.argv[3]))["summary"]["requestsPerSec"]
dur, target, hz = float(sys.argv[4]), sys.argv[5], int(sys.argv[6])
segs = int(sys.argv[8]) - int(sys.argv[7])
reqs = rps * dur
user, kernel = (u1 - u0) / hz * 1e6 / reqs, (s1 - s0) / hz * 1e6 / reqs
shape = "closed loop" if len(sys.argv) < 10 else f"at a fixed {sys.argv[9]}/s"
print(
    f"{target}: {rps:.0f} req/s {shape}; CPU per request {user + kernel:.1f} µs = user {user:.1f} + kernel {kernel:.1f}; "
    f"loopback TCP segments per request {segs / reqs:.2f} (all processes; 2 is a direct call)"
)
PY
if [[ -n "${RECORD:-}" ]]; then
  echo "perf data: $ROOT/target/perf/split-$TARGET.data (perf report -i FILE --no-children --sort dso,sym -g none)"
fi
