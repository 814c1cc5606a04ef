#!/usr/bin/env python3
"""Hedged reads under a mixed workload: three loopback upstreams behind one Prism, one of them slow
(+SLOW_MS on FRACTION of its calls); the same fixed-rate traffic of distinct reads with hedging off, then on.

Prints, for each run: client p50/p99/max, the p99 of calls the healthy providers answered at the first
attempt (the floor hedging aims at), hedges sent and won, and the extra upstream calls hedging cost (upstream
attempts / client calls - 1, from /metrics). Stops by itself.

Usage: [HEDGE_BUDGET=5] hedge.py PRISM_BIN [RATE] [SECONDS] [SLOW_MS] [FRACTION]
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from loopback import free_port, wait_port

HERE = os.path.dirname(os.path.abspath(__file__))
# [policy.hedge] budget_percent of the hedged run (HEDGE_BUDGET, default the config default, 5).
BUDGET = float(os.environ.get("HEDGE_BUDGET", "5"))


def metric_sum(admin, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=2).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def quantile(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1)))]


def run(prism_bin, ups, hedge_on, rate, seconds, work):
    listen, admin = free_port(), free_port()
    cfg = os.path.join(work, f"hedge-{hedge_on}.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{listen}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 1\npin_cores = false\n')
        f.write("[cache]\nenabled = false\ndedupe = false\n")
        f.write(f"[policy.hedge]\nenabled = {'true' if hedge_on else 'false'}\nbudget_percent = {BUDGET}\n")
        f.write('[[networks]]\nname = "bench"\nkind = "evm"\nchain_id = 4663\nprobe_interval_ms = 500\n')
        for i, port in enumerate(ups):
            f.write(f'  [[networks.providers]]\n  name = "p{i}"\n  url = "http://127.0.0.1:{port}"\n')
    prism = subprocess.Popen([prism_bin, "serve", "--config", cfg], stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(work, f"log-{hedge_on}"), "w"))
    try:
        url = f"http://127.0.0.1:{listen}/"
        probe = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber"}).encode()
        for _ in range(200):
            try:
                if b"result" in urllib.request.urlopen(urllib.request.Request(url, data=probe), timeout=1).read():
                    break
            except Exception:
                time.sleep(0.05)
        lock = threading.Lock()
        samples = []  # (latency_s, provider, attempts, hedged, ok)
        counter = [0]

        def one(n):
            body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "eth_getBalance",
                               "params": ["0x%040x" % n, "latest"]}).encode()
            started = time.monotonic()
            try:
                resp = urllib.request.urlopen(urllib.request.Request(url, data=body, headers={"content-type": "application/json"}), timeout=5)
                out = json.loads(resp.read())
                ok = out.get("id") == n and "result" in out
                provider, attempts, hedged = resp.headers.get("x-prism-provider"), resp.headers.get("x-prism-attempts"), resp.headers.get("x-prism-hedged")
            except Exception:
                ok, provider, attempts, hedged = False, None, None, None
            with lock:
                samples.append((time.monotonic() - started, provider, attempts, hedged, ok))

        calls_before = metric_sum(admin, "prism_upstream_attempts_total")
        start = time.monotonic()
        threads = []
        while time.monotonic() - start < seconds:
            while counter[0] < (time.monotonic() - start) * rate:
                counter[0] += 1
                t = threading.Thread(target=one, args=(counter[0],))
                t.start()
                threads.append(t)
            time.sleep(0.002)
        for t in threads:
            t.join()
        attempts = metric_sum(admin, "prism_upstream_attempts_total") - calls_before
        answered = {}
        for s_ in samples:
            if s_[4]:
                answered[s_[1]] = answered.get(s_[1], 0) + 1
        lat = [s[0] * 1000 for s in samples if s[4]]
        healthy_first = [s[0] * 1000 for s in samples if s[4] and s[1] in ("p1", "p2") and s[2] == "1"]
        return {
            "hedging": hedge_on,
            "requests": len(samples),
            "errors": sum(1 for s in samples if not s[4]),
            "p50_ms": round(quantile(lat, 0.5), 2),
            "p99_ms": round(quantile(lat, 0.99), 2),
            "max_ms": round(max(lat), 2),
            "healthy_first_attempt_p99_ms": round(quantile(healthy_first, 0.99), 2),
            "hedged_calls": sum(1 for s in samples if s[3] == "true"),
            "hedges_sent": metric_sum(admin, "prism_hedges_total"),
            "hedges_won": metric_sum(admin, "prism_hedges_won_total"),
            "upstream_calls_per_request": round(attempts / max(len(samples), 1), 4),
            "answered_by": answered,
        }
    finally:
        prism.kill()


def main():
    prism_bin = sys.argv[1]
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 15
    slow_ms = sys.argv[4] if len(sys.argv) > 4 else "300"
    fraction = sys.argv[5] if len(sys.argv) > 5 else "0.3"
    work = tempfile.mkdtemp(prefix="hedge.")
    ups, procs = [], []
    try:
        for i in range(3):
            port = free_port()
            args = [sys.executable, os.path.join(HERE, "flaky_upstream.py"), str(port)]
            args += [slow_ms, fraction] if i == 0 else ["0", "0"]
            procs.append(subprocess.Popen(args))
            ups.append(port)
        for port in ups:  # wait until each upstream accepts
            wait_port(port)
        for hedge_on in (False, True):
            print(json.dumps(run(prism_bin, ups, hedge_on, rate, seconds, work)), flush=True)
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    main()
