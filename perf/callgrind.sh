#!/usr/bin/env bash
# Instructions per forwarded request: Prism (release, 1 shard) under callgrind in front of the fast upstream;
# an ordinary client process (not under callgrind) sends exactly N requests between a zero and a dump.
# Stable run to run on noisy machines, unlike wall-clock figures. See perf/README.md.
#
# Usage: perf/callgrind.sh          (env: N=2000 WARM=500 CONC=1 SKIP_BUILD=1 OUT=dir PROXY_CPU=0 LOAD_CPU=1
#                                    PASSTHROUGH=1 for dedupe and cache off; default Prism's defaults;
#                                    BODIES=distinct for a different eth_getBalance each request, as
#                                    compare.sh sends; default BODIES=same, one eth_blockNumber repeated)
#        TARGET=floor perf/callgrind.sh   the same count for the floor (examples/floor_forwarder.rs), so
#                                         Prism's own share is the difference
# Output: the figures on stdout; dumps and callgrind_annotate listings under $OUT
#         (default target/perf/callgrind-<time>/).
#
# Works because Prism's request path needs only its shard thread: valgrind 3.19 does not release its big lock
# while a thread blocks in io_uring_enter, so a thread waiting on the ring starves the others in the process
# (see perf/README.md); clients and the upstream therefore live in other processes.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=perf/bench_config.sh
. "$ROOT/perf/bench_config.sh"
N=${N:-2000}
WARM=${WARM:-500}
CONC=${CONC:-1}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
PASSTHROUGH=${PASSTHROUGH:-0}
BODIES=${BODIES:-same}
OUT=${OUT:-$ROOT/target/perf/callgrind-$(date +%Y%m%d-%H%M%S)}
# The binary runs from a copy with a neutral name, so nothing that cleans up Prism processes by name
# (pkill -f prism) hits it: keep "prism" out of RUN's path.
RUN=$(mktemp -d /tmp/cgrun.XXXXXX)
BODY='{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
mkdir -p "$OUT"
declare -a STARTED=()

log() { printf '[callgrind %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }
cleanup() {
  local rc=$? pid i
  set +e
  for pid in "${STARTED[@]}"; do
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  wait 2>/dev/null
  rm -rf "$RUN"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v valgrind >/dev/null || die "valgrind not installed (apt-get install -y valgrind)"
UPSTREAM_BIN="$ROOT/target/perf/fast_upstream"
export TARGET=${TARGET:-prism}
case "$TARGET" in
  prism) PROXY_BIN="${PRISM_BIN:-$ROOT/target/release/prism}"; BUILD=(--bin prism) ;;
  floor) PROXY_BIN="${FLOOR_BIN:-$ROOT/target/release/examples/floor_forwarder}"; BUILD=(--example floor_forwarder) ;;
  *) die "TARGET is prism or floor" ;;
esac
if [[ -z "${SKIP_BUILD:-}" ]]; then
  mkdir -p "$ROOT/target/perf"
  rustc --edition 2021 -C opt-level=3 -C debuginfo=1 "$ROOT/examples/fast_upstream.rs" -o "$UPSTREAM_BIN"
  (cd "$ROOT" && cargo build --release "${BUILD[@]}") >&2
fi
[[ -x "$PROXY_BIN" && -x "$UPSTREAM_BIN" ]] || die "missing binaries (run without SKIP_BUILD)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

UP_PORT=$(free_port)
taskset -c "$LOAD_CPU" "$UPSTREAM_BIN" "127.0.0.1:$UP_PORT" 4663 >"$OUT/upstream.log" 2>&1 &
STARTED+=($!)
PR_PORT=$(free_port)
cp "$PROXY_BIN" "$RUN/rpc-proxy"
bench_config "127.0.0.1:$PR_PORT" "127.0.0.1:0" "http://127.0.0.1:$UP_PORT" 1 "$PASSTHROUGH" >"$RUN/config.toml"
sleep 0.2
if [[ "$TARGET" == floor ]]; then
  PROXY_CMD=("$RUN/rpc-proxy" "127.0.0.1:$PR_PORT" "127.0.0.1:$UP_PORT")
else
  PROXY_CMD=("$RUN/rpc-proxy" serve --config "$RUN/config.toml")
fi
taskset -c "$PROXY_CPU" valgrind --tool=callgrind --separate-threads=yes --dump-instr=no \
  --callgrind-out-file="$RUN/callgrind.out" "${PROXY_CMD[@]}" >"$OUT/proxy.log" 2>&1 &
VG=$!
STARTED=("$VG" "${STARTED[@]}") # stop prism before its upstream
for i in $(seq 120); do
  out=$(curl -s -m 5 -X POST -H 'content-type: application/json' -d "$BODY" "http://127.0.0.1:$PR_PORT/" || true)
  [[ "$out" == *'"result":"0x1"'* ]] && break
  kill -0 "$VG" 2>/dev/null || { tail -20 "$OUT/proxy.log" >&2; die "prism exited under valgrind"; }
  sleep 0.5
done
[[ "$out" == *'"result":"0x1"'* ]] || { tail -20 "$OUT/proxy.log" >&2; die "$TARGET under callgrind did not answer"; }
log "$TARGET (valgrind pid $VG) answers on $PR_PORT"

client() { taskset -c "$LOAD_CPU" python3 "$ROOT/perf/rpc_client.py" "$PR_PORT" "$1" "$CONC" "$BODIES"; }
ctl() { timeout 60 callgrind_control "$@" "$VG" >/dev/null 2>&1 || die "callgrind_control $* failed (is the process stuck in io_uring_enter?)"; }

log "warm-up: $WARM requests"
client "$WARM"
ctl -z
t0=$(date +%s.%N)
client "$N"
t1=$(date +%s.%N)
ctl -d
sleep 0.5
load_files=$(ls "$RUN"/callgrind.out.1-* 2>/dev/null || ls "$RUN"/callgrind.out.1)
# The same span of time with no requests: what timers and background threads cost by themselves.
ctl -z
idle_s=$(python3 -c "print(max(1.0, $t1 - $t0))")
sleep "$idle_s"
ctl -d
sleep 0.5
idle_files=$(ls "$RUN"/callgrind.out.2-* 2>/dev/null || ls "$RUN"/callgrind.out.2)

for f in $load_files; do
  tid=${f##*-}
  callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$f" 2>/dev/null >"$OUT/top-inclusive-thread$tid.txt" || true
  callgrind_annotate --auto=no --threshold=100 "$f" 2>/dev/null >"$OUT/top-self-thread$tid.txt" || true
done

cp "$RUN"/callgrind.out.* "$RUN/config.toml" "$OUT"/ 2>/dev/null || true

python3 - "$N" "$(python3 -c "print($t1 - $t0)")" "$idle_s" "$OUT" $load_files -- $idle_files <<'EOF'
import re, sys
n, load_s, idle_s, out = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rest = sys.argv[5:]
sep = rest.index("--")
load, idle = rest[:sep], rest[sep + 1:]

def total(path):
    for line in open(path, errors="replace"):
        m = re.match(r"^(summary|totals):\s+(\d+)", line)
        if m:
            return int(m.group(2))
    return 0

def tid(path):
    m = re.search(r"-(\d+)$", path)
    return m.group(1) if m else "all"

L = {tid(f): total(f) for f in load}
I = {tid(f): total(f) for f in idle}
gross = sum(L.values())
idle_rate = sum(I.values()) / idle_s
net = gross - idle_rate * load_s
import os
who = "the floor" if os.environ.get("TARGET") == "floor" else "Prism (1 shard)"
print(f"callgrind: {n} requests through {who} in {load_s:.2f}s under callgrind")
print(f"  instructions per forwarded request, all threads: {gross / n:,.0f} Ir   [target ≤ 50,000]")
print(f"  minus idle background (timers, other threads; {idle_rate:,.0f} Ir/s): {net / n:,.0f} Ir")
for t in sorted(L, key=lambda k: -L[k]):
    print(f"  thread {t}: {L[t] / n:,.0f} Ir/req while loaded, {I.get(t, 0) / idle_s:,.0f} Ir/s idle")
busiest = max(L, key=lambda k: L[k])
# callgrind_annotate splits a function's cost by the source file of inlined code ("file:function [object]"):
# sum it back per function.
per_fn = {}
table = False
for line in open(f"{out}/top-self-thread{busiest}.txt", errors="replace"):
    if "file:function" in line:
        table = True
        continue
    if not table or line.startswith("---"):
        continue
    if not line.strip():
        break
    m = re.match(r"^\s*([\d,]+) \(\s*([\d.]+)%\)\s+(.*)$", line)
    if not m or "PROGRAM TOTALS" in line:
        continue
    ir, pct, name = int(m.group(1).replace(",", "")), float(m.group(2)), m.group(3)
    if pct >= 99.0:  # thread entry frames show the whole thread as "self" after a mid-run zero
        continue
    name = re.sub(r" \[[^\]]*\]$", "", name)
    fm = re.match(r"^[^:]*[^:]:(?!:)(.*)$", name)
    fn = fm.group(1) if fm else name
    per_fn[fn] = per_fn.get(fn, 0) + ir
top = sorted(per_fn.items(), key=lambda kv: -kv[1])[:20]
with open(f"{out}/top-functions.txt", "w") as f:
    for fn, ir in sorted(per_fn.items(), key=lambda kv: -kv[1]):
        f.write(f"{ir / n:>10,.0f} Ir/req  {100 * ir / L[busiest]:6.2f}%  {fn}\n")
print(f"  top self cost per function on thread {busiest} (Ir per request; all in {out}/top-functions.txt):")
for fn, ir in top:
    print(f"    {ir / n:>8,.0f}  {100 * ir / L[busiest]:5.2f}%  {fn[:140]}")
print(f"  listings: {out}/top-self-thread*.txt, {out}/top-inclusive-thread*.txt (callgrind_annotate)")
EOF
