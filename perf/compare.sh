#!/usr/bin/env bash
# Side-by-side load comparison on loopback: a fast upstream called directly, through nginx (1 worker, upstream
# keep-alive) and through Prism (1 shard), interleaved over several rounds in one run. See perf/README.md.
#
# Usage: perf/compare.sh            (env knobs below; e.g. ROUNDS=5 DURATION=15 perf/compare.sh)
#   ROUNDS=3          rounds; each round runs every target once in each mode, targets in rotated order
#   DURATION=10       seconds per measured run
#   WARMUP=2          seconds of unmeasured closed-loop load before each target's runs
#   RATE=5000         fixed rate (req/s) of the latency run (oha -q, --latency-correction)
#   FIXED_CONC=16     connections of the fixed-rate run
#   CLOSED_CONC=32    connections of the closed-loop run
#   TARGETS="direct nginx floor prism prismon"
#                     floor: examples/floor_forwarder.rs, a minimal glommio forwarder with no Prism logic (the
#                     runtime's floor); prism: dedupe and cache off (PASSTHROUGH); prismon: the same build with
#                     dedupe and cache on, the default a user runs
#   BODIES=distinct   every request a different eth_getBalance (id and address vary; oha -Z picks lines of a
#                     LINES-line file at random, so a few repeat); BODIES=same repeats one eth_blockNumber body
#   LINES=1000000
#   SYSCALLS=1        count system calls of the proxy during each fixed-rate run (perf stat, raw_syscalls)
#   EXTRA_EVENTS=     more perf tracepoints counted with the syscalls (comma list, e.g. sched:sched_switch); each
#                     fixed-rate run then logs them per request ("events per request: ...")
#   PROXY_CPU=0 LOAD_CPU=1   the proxy under test runs on PROXY_CPU; oha and the upstream on LOAD_CPU (taskset
#                     lists: PROXY_CPU=0-3 LOAD_CPU=4-15)
#   SHARDS=1          Prism's shards and nginx's worker processes (floor stays one executor); perf/scaling.sh
#                     runs this script for several SHARDS on a many-core machine
#   QUIET_WAIT=120    before each measured run wait up to this many seconds for both cores to be idle (< 10% busy
#                     over 1 s), so an unrelated build does not land in a measurement; 0 disables
#   SKIP_BUILD=1      use the binaries already built (PRISM_BIN=path picks another Prism build)
#   BASE_BIN=path     a second Prism build (say, before a change) as target "base" (pass-through) and "baseon"
#                     (dedupe and cache on) in the same run; add "base" and/or "baseon"
#                     to TARGETS
#   PASSTHROUGH=1     Prism with [cache] dedupe and cache off (default): the one repeated body is then forwarded
#                     every time, as distinct requests are; PASSTHROUGH=0 measures with dedupe joining them
#   SPIN_US=0         Prism's server.spin_before_park_us
#   TLS=1             HTTPS at the edge: nginx and Prism terminate TLS with the same P-256 certificate (made here
#                     by openssl), session resumption on in both (nginx: a shared session cache and tickets;
#                     Prism: rustls' per-shard session cache); oha checks no certificate (--insecure). direct
#                     and floor stay plain HTTP, so TARGETS defaults to "nginx prism prismon"
#   NEWCONN=1         a new connection per request (oha --disable-keepalive): with TLS=1 a handshake per
#                     request, which oha's rustls client resumes from the session it was last given
#   KEEP=1            keep the work directory (configs, logs, raw oha JSON)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PERF="$ROOT/perf"
# shellcheck source=perf/bench_config.sh
. "$PERF/bench_config.sh"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
RATE=${RATE:-5000}
FIXED_CONC=${FIXED_CONC:-16}
CLOSED_CONC=${CLOSED_CONC:-32}
TLS=${TLS:-0}
NEWCONN=${NEWCONN:-0}
if [[ $TLS == 1 ]]; then TARGETS=${TARGETS:-"nginx prism prismon"}; fi
TARGETS=${TARGETS:-"direct nginx floor prism prismon"}
SCHEME=http
if [[ $TLS == 1 ]]; then SCHEME=https; fi
BODIES=${BODIES:-distinct}
LINES=${LINES:-1000000}
SYSCALLS=${SYSCALLS:-1}
EXTRA_EVENTS=${EXTRA_EVENTS:-}
PROXY_CPU=${PROXY_CPU:-0}
SHARDS=${SHARDS:-1}
LOAD_CPU=${LOAD_CPU:-1}
QUIET_WAIT=${QUIET_WAIT:-120}
BODY='{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'

BODY_FILE=""

# No "prism" in any path or name of what runs: other work on the machine that cleans up its own Prism
# processes by name (pkill -f prism) must not hit the one under test.
WORK=$(mktemp -d /tmp/perfcmp.XXXXXX)
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
declare -a STARTED=() # pids this script started (each the leader of what it runs)

log() { printf '[compare %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

stop_pid() { # pid: SIGTERM, then SIGKILL after 5 s
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  set +e
  for pid in "${STARTED[@]}"; do stop_pid "$pid"; done
  wait 2>/dev/null
  if [[ -n "${KEEP:-}" || $rc -ne 0 ]]; then log "work directory kept: $WORK"; else rm -rf "$WORK"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits until a POST to $1 answers with a JSON-RPC result; fails after ~10 s.
wait_ready() {
  local url=$1 name=$2 i out
  for i in $(seq 100); do
    out=$(curl -s -k -m 1 -X POST -H 'content-type: application/json' -d "$BODY" "$url" || true)
    if [[ "$out" == *'"result"'* && "$out" == *'"id":1'* ]]; then log "$name ready at $url: $out"; return 0; fi
    sleep 0.1
  done
  die "$name did not answer at $url (last answer: ${out:-none})"
}

# utime+stime (clock ticks) summed over the pids given.
cpu_ticks() {
  local t=0 pid f
  for pid in "$@"; do
    f=$(cat "/proc/$pid/stat") || die "process $pid is gone (see its log under $WORK)"
    f=${f##*) } # fields after the command name; utime, stime are fields 14, 15 → 12th, 13th here
    read -r -a a <<<"$f"
    t=$((t + a[11] + a[12]))
  done
  echo "$t"
}
# Sum of on-CPU nanoseconds of every live thread (schedstat), a finer cross-check of cpu_ticks.
sched_ns() {
  local t=0 pid s
  for pid in "$@"; do
    for s in /proc/"$pid"/task/*/schedstat; do
      read -r ns _ <"$s" 2>/dev/null || continue
      t=$((t + ns))
    done
  done
  echo "$t"
}
cpu_names() { # a taskset list ("0-3,6") as " cpu0 cpu1 cpu2 cpu3 cpu6 "
  local part a b i out=" "
  IFS=, read -r -a parts <<<"$1"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then a=${part%-*}; b=${part#*-}; for ((i = a; i <= b; i++)); do out+="cpu$i "; done
    else out+="cpu$part "; fi
  done
  echo "$out"
}
core_busy() { # busy ticks (user nice system irq softirq) of the CPUs in list $1, from /proc/stat
  awk -v set="$(cpu_names "$1")" 'index(set, " " $1 " ") { t += $2 + $3 + $4 + $7 + $8 } END { print t + 0 }' /proc/stat
}
# Waits (up to QUIET_WAIT s) until both cores were idle for a whole second.
wait_quiet() {
  ((QUIET_WAIT > 0)) || return 0
  local deadline=$((SECONDS + QUIET_WAIT)) p0 l0 p1 l1 hz said=""
  hz=$(getconf CLK_TCK)
  while :; do
    p0=$(core_busy "$PROXY_CPU"); l0=$(core_busy "$LOAD_CPU")
    sleep 1
    p1=$(core_busy "$PROXY_CPU"); l1=$(core_busy "$LOAD_CPU")
    if (((p1 - p0) * 10 <= hz && (l1 - l0) * 10 <= hz)); then return 0; fi
    if ((SECONDS >= deadline)); then log "warning: cores still busy (cpu$PROXY_CPU $((p1 - p0)), cpu$LOAD_CPU $((l1 - l0)) ticks/s); measuring anyway"; return 0; fi
    [[ -n "$said" ]] || { log "waiting for the cores to go quiet (cpu$PROXY_CPU $((p1 - p0)), cpu$LOAD_CPU $((l1 - l0)) ticks/s busy)"; said=1; }
  done
}
hwm_kb() { # sum of VmHWM over pids
  local t=0 pid v
  for pid in "$@"; do
    v=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
    t=$((t + v))
  done
  echo "$t"
}

# ---------------------------------------------------------------------------------------------- tools and builds
find_oha() {
  if command -v oha >/dev/null; then command -v oha; return; fi
  if [[ -x "$HOME/.cargo/bin/oha" ]]; then echo "$HOME/.cargo/bin/oha"; return; fi
  log "oha not found: cargo install oha --locked (a few minutes)"
  cargo install oha --locked >&2 || die "cargo install oha failed"
  echo "$HOME/.cargo/bin/oha"
}
OHA=$(find_oha)
# oha >= 1.5 writes JSON with --output-format json; older ones with -j.
if "$OHA" --help | grep -q -- '--output-format'; then OHA_JSON=(--output-format json); else OHA_JSON=(-j); fi
log "oha: $("$OHA" --version)"
if [[ $BODIES == distinct ]]; then
  BODY_FILE="$WORK/bodies.txt"
  python3 - "$BODY_FILE" "$LINES" <<'PY'
import sys
path, n = sys.argv[1], int(sys.argv[2])
with open(path, "w") as f:
    for i in range(1, n + 1):
        f.write('{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x%040x","latest"]}\n' % (i, i * 2654435761))
PY
  BODY_ARGS=(-Z "$BODY_FILE")
  log "distinct bodies: $LINES eth_getBalance lines in $BODY_FILE (oha picks at random)"
else
  BODY_ARGS=(-d "$BODY")
fi
PERF_BIN=""
if [[ $SYSCALLS == 1 ]]; then
  PERF_BIN=$(command -v perf || true)
  if [[ -z "$PERF_BIN" ]] || ! "$PERF_BIN" stat -e raw_syscalls:sys_enter -x, -- true >/dev/null 2>&1; then
    log "perf stat with raw_syscalls is not available here (apt-get install linux-perf; run as root): no syscall counts"
    PERF_BIN=""
  fi
fi

want() { [[ " $TARGETS " == *" $1 "* ]]; }

if want nginx; then
  NGINX=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null || true)
  if [[ -z "$NGINX" ]]; then
    log "nginx not found: apt-get install -y nginx"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx) >&2 || die "cannot install nginx"
    NGINX=/usr/sbin/nginx
  fi
  log "nginx: $("$NGINX" -v 2>&1)"
fi

mkdir -p "$ROOT/target/perf"
UPSTREAM_BIN="$ROOT/target/perf/fast_upstream"
PRISM_BIN="${PRISM_BIN:-$ROOT/target/release/prism}"
if [[ -z "${SKIP_BUILD:-}" ]]; then
  log "building the fast upstream (rustc -O, std only)"
  rustc --edition 2021 -C opt-level=3 -C debuginfo=1 "$ROOT/examples/fast_upstream.rs" -o "$UPSTREAM_BIN"
  if want prism || want prismon; then
    log "cargo build --release"
    (cd "$ROOT" && cargo build --release --bin prism) >&2
  fi
  if want floor; then
    log "cargo build --release --example floor_forwarder"
    (cd "$ROOT" && cargo build --release --example floor_forwarder) >&2
  fi
fi
FLOOR_BIN="${FLOOR_BIN:-$ROOT/target/release/examples/floor_forwarder}"
if want floor; then [[ -x "$FLOOR_BIN" ]] || die "missing $FLOOR_BIN"; fi
[[ -x "$UPSTREAM_BIN" ]] || die "missing $UPSTREAM_BIN"
if want prism || want prismon; then [[ -x "$PRISM_BIN" ]] || die "missing $PRISM_BIN"; fi

# ---------------------------------------------------------------------------------------------- processes
TLS_NGINX=""
if [[ $TLS == 1 ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" >/dev/null 2>&1 || die "openssl could not make a certificate"
  export BENCH_TLS_CERT="$WORK/cert.pem" BENCH_TLS_KEY="$WORK/key.pem"
  TLS_NGINX="ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem; ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m; ssl_session_tickets on;"
  log "TLS at the edge: P-256 certificate $WORK/cert.pem, resumption on (nginx session cache + tickets, Prism rustls cache)"
fi
UP_PORT=$(free_port)
taskset -c "$LOAD_CPU" "$UPSTREAM_BIN" "127.0.0.1:$UP_PORT" 4663 >"$WORK/upstream.log" 2>&1 &
STARTED+=($!)
wait_ready "http://127.0.0.1:$UP_PORT/" upstream
declare -A URL PIDS ADMIN
URL[direct]="http://127.0.0.1:$UP_PORT/"
PIDS[direct]=""

if want nginx; then
  NG_PORT=$(free_port)
  NG="$WORK/nginx"
  mkdir -p "$NG/logs" "$NG/tmp"
  cat >"$NG/nginx.conf" <<EOF
worker_processes $SHARDS;
daemon off;
master_process on;
user root;
pid $NG/nginx.pid;
error_log $NG/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $NG/tmp/body;
  proxy_temp_path $NG/tmp/proxy;
  fastcgi_temp_path $NG/tmp/fastcgi;
  uwsgi_temp_path $NG/tmp/uwsgi;
  scgi_temp_path $NG/tmp/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  upstream fast {
    server 127.0.0.1:$UP_PORT;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$NG_PORT${TLS_NGINX:+ ssl};
    $TLS_NGINX
    location / {
      proxy_pass http://fast;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
  taskset -c "$PROXY_CPU" "$NGINX" -p "$NG" -c "$NG/nginx.conf" >"$NG/logs/stdout.log" 2>&1 &
  NG_MASTER=$!
  STARTED+=("$NG_MASTER")
  URL[nginx]="$SCHEME://127.0.0.1:$NG_PORT/"
  wait_ready "${URL[nginx]}" nginx
  NG_WORKERS=$(pgrep -P "$NG_MASTER" | tr '\n' ' ')
  [[ -n "$NG_WORKERS" ]] || die "no nginx worker under master $NG_MASTER"
  PIDS[nginx]="$NG_MASTER $NG_WORKERS"
  log "nginx master $NG_MASTER workers $NG_WORKERS"
fi

if want floor; then
  FL_PORT=$(free_port)
  mkdir -p "$WORK/floor"
  cp "$FLOOR_BIN" "$WORK/floor/forwarder"
  taskset -c "$PROXY_CPU" "$WORK/floor/forwarder" "127.0.0.1:$FL_PORT" "127.0.0.1:$UP_PORT" >"$WORK/floor/log" 2>&1 &
  STARTED+=($!)
  PIDS[floor]=$!
  URL[floor]="http://127.0.0.1:$FL_PORT/"
  wait_ready "${URL[floor]}" floor
fi

# Starts one Prism build as target $1 from binary $2 ($3 = on: dedupe and cache on whatever PASSTHROUGH says).
start_prism() { # target binary [on]
  local target=$1 bin=$2 port dir pid passthrough=0
  port=$(free_port)
  ADMIN[$target]=127.0.0.1:$(free_port)
  dir="$WORK/proxy-$target"
  mkdir -p "$dir"
  cp "$bin" "$dir/rpc-proxy" # see WORK above
  if [[ "${PASSTHROUGH:-1}" == 1 && "${3:-}" != on ]]; then passthrough=1; fi
  bench_config "127.0.0.1:$port" "${ADMIN[$target]}" "http://127.0.0.1:$UP_PORT" "$SHARDS" "$passthrough" "${SPIN_US:-0}" \
    >"$dir/config.toml"
  taskset -c "$PROXY_CPU" "$dir/rpc-proxy" serve --config "$dir/config.toml" >"$dir/proxy.log" 2>&1 &
  pid=$!
  STARTED+=("$pid")
  URL[$target]="$SCHEME://127.0.0.1:$port/"
  wait_ready "${URL[$target]}" "$target" || { tail -20 "$dir/proxy.log" >&2; exit 1; }
  PIDS[$target]="$pid"
  log "$target pid $pid ($(ls /proc/$pid/task | wc -l) threads)"
}

if want prism; then start_prism prism "$PRISM_BIN"; fi
if want prismon; then start_prism prismon "$PRISM_BIN" on; fi
if want base || want baseon; then
  [[ -x "${BASE_BIN:-}" ]] || die "targets base and baseon need BASE_BIN=path to a prism binary"
fi
if want base; then start_prism base "$BASE_BIN"; fi
if want baseon; then start_prism baseon "$BASE_BIN" on; fi

# ---------------------------------------------------------------------------------------------- load
oha_run() { # target mode round
  local target=$1 mode=$2 round=$3 out="$WORK/oha-$3-$1-$2.json" pids=${PIDS[$1]} c0=0 c1=0 s0=0 s1=0 rss=0 b0 b1
  local -a args=(--no-tui -z "${DURATION}s" -m POST -H 'content-type: application/json' "${BODY_ARGS[@]}")
  local perf_pid="" syscalls=-1
  if [[ $mode == fixed ]]; then args+=(-c "$FIXED_CONC" -q "$RATE" --latency-correction); else args+=(-c "$CLOSED_CONC"); fi
  if [[ $TLS == 1 ]]; then args+=(--insecure); fi
  if [[ $NEWCONN == 1 ]]; then args+=(--disable-keepalive); fi
  wait_quiet
  # shellcheck disable=SC2086
  if [[ -n "$pids" ]]; then c0=$(cpu_ticks $pids); s0=$(sched_ns $pids); fi
  b0=$(core_busy "$PROXY_CPU")
  if [[ $mode == fixed && -n "$PERF_BIN" && -n "$pids" ]]; then
    "$PERF_BIN" stat -x, -e "raw_syscalls:sys_enter${EXTRA_EVENTS:+,$EXTRA_EVENTS}" -p "$(echo $pids | tr ' ' ',')" -o "$out.syscalls" &
    perf_pid=$!
  fi
  taskset -c "$LOAD_CPU" "$OHA" "${OHA_JSON[@]}" "${args[@]}" "${URL[$target]}" >"$out" 2>"$out.err" || die "oha failed on $target: $(cat "$out.err")"
  b1=$(core_busy "$PROXY_CPU")
  if [[ -n "$perf_pid" ]]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    syscalls=$(awk -F, '/raw_syscalls:sys_enter/ { print $1 }' "$out.syscalls" 2>/dev/null | head -1)
    [[ "$syscalls" =~ ^[0-9]+$ ]] || syscalls=-1
  fi
  # shellcheck disable=SC2086
  if [[ -n "$pids" ]]; then c1=$(cpu_ticks $pids); s1=$(sched_ns $pids); rss=$(hwm_kb $pids); fi
  printf '{"round":%d,"target":"%s","mode":"%s","oha":"%s","cpu_ticks":%d,"hz":%d,"sched_ns":%d,"rss_kb":%d,"core_busy_ticks":%d,"syscalls":%d}\n' \
    "$round" "$target" "$mode" "$out" $((c1 - c0)) "$(getconf CLK_TCK)" $((s1 - s0)) "$rss" $((b1 - b0)) "$syscalls" >>"$RESULTS"
  python3 "$PERF/report.py" --one "$RESULTS" >&2
  if [[ -n "$perf_pid" && -n "$EXTRA_EVENTS" ]]; then
    log "$target round $round events per request: $(python3 - "$out" "$out.syscalls" <<'PY'
import json, sys
codes = json.load(open(sys.argv[1])).get("statusCodeDistribution") or {}
n = max(1, sum(codes.values()))
for line in open(sys.argv[2]):
    f = line.strip().split(",")
    if len(f) > 2 and ":" in f[2] and "raw_syscalls" not in f[2] and f[0].isdigit():
        print(f"{f[2]} {int(f[0]) / n:.2f}", end="  ")
PY
)"
  fi
}

read -r -a T <<<"$TARGETS"
TLS_OHA=()
if [[ $TLS == 1 ]]; then TLS_OHA=(--insecure); fi
if [[ $TLS == 1 ]]; then # resumption on, as a client that keeps its sessions sees it
  for t in "${T[@]}"; do
    hp=${URL[$t]#*://}; hp=${hp%/}
    log "$t: TLS session resumption: $(python3 "$PERF/tls_resume.py" "$hp" 5 2>&1)"
  done
fi
log "tls=$TLS new connection per request=$NEWCONN"
log "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (other work on these 2 cores skews every figure)"
log "rounds=$ROUNDS duration=${DURATION}s rate=$RATE fixed_c=$FIXED_CONC closed_c=$CLOSED_CONC proxy cpu=$PROXY_CPU load cpu=$LOAD_CPU shards=$SHARDS"
for ((r = 1; r <= ROUNDS; r++)); do
  n=${#T[@]}
  for ((k = 0; k < n; k++)); do
    target=${T[$(((k + r - 1) % n))]} # rotate the order each round
    if ((WARMUP > 0)); then
      taskset -c "$LOAD_CPU" "$OHA" --no-tui -z "${WARMUP}s" -c "$CLOSED_CONC" -m POST -H 'content-type: application/json' \
        "${BODY_ARGS[@]}" ${TLS_OHA[@]+"${TLS_OHA[@]}"} "${URL[$target]}" >/dev/null 2>&1 || true
    fi
    oha_run "$target" fixed "$r"
    oha_run "$target" closed "$r"
  done
done

# Peak RSS after the whole run, and a last check the proxies still answer correctly.
for t in "${T[@]}"; do
  out=$(curl -s -k -m 2 -X POST -H 'content-type: application/json' -d "$BODY" "${URL[$t]}" || true)
  [[ "$out" == *'"result":"0x1"'* ]] || log "warning: $t answered '$out' after the run"
done
# What dedupe and the cache did with the distinct traffic (joins and hits make a target do less work).
for t in prism prismon; do
  want "$t" || continue
  m=$(curl -s -m 2 "http://${ADMIN[$t]}/metrics" | grep -E '^prism_(cache_hits|cache_misses|dedupe_joins)_total' | tr '\n' ' ' || true)
  log "$t metrics after the run: ${m:-none}"
done

echo
python3 "$PERF/report.py" --rate "$RATE" --duration "$DURATION" "$RESULTS"
