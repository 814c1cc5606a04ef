#!/usr/bin/env python3
"""Verified reads beside plain reads: two fast loopback upstreams behind one Prism (1 shard, cache and dedupe off),
one key that verifies eth_getBalance (quorum 2) and one that does not; the same distinct reads through each, in
alternating rounds on one keep-alive connection. Prints per key: client latency p50/p99, upstream calls per read
(from /metrics) and Prism's CPU per read (utime+stime from /proc).

Usage: verified.py PRISM_BIN [READS_PER_ROUND] [ROUNDS]
"""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

from loopback import free_port, start_fast_upstream, wait_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def metric_sum(admin, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=2).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name + "{") or l.startswith(name + " "))


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quantile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1)))]


def main():
    prism_bin = sys.argv[1]
    per_round = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    procs = []
    work = tempfile.mkdtemp(prefix="verified.")
    try:
        ups = [start_fast_upstream(ROOT, procs) for _ in range(2)]
        port, admin = free_port(), free_port()
        cfg = os.path.join(work, "config.toml")
        with open(cfg, "w") as f:
            f.write(f'[server]\nlisten = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 1\npin_cores = false\n')
            f.write("[cache]\nenabled = false\ndedupe = false\n[policy.hedge]\nenabled = false\n")
            f.write('[[networks]]\nname = "bench"\nkind = "evm"\nchain_id = 4663\nprobe_interval_ms = 500\n')
            for i, up in enumerate(ups):
                f.write(f'  [[networks.providers]]\n  name = "p{i + 1}"\n  url = "http://127.0.0.1:{up}"\n')
            f.write('[[keys]]\nname = "plain"\nkey = "plain-key"\n')
            f.write('[[keys]]\nname = "verified"\nkey = "verified-key"\nverify = { methods = ["eth_getBalance"], quorum = 2 }\n')
        proxy = os.path.join(work, "rpc-proxy")  # a neutral name (see perf/README.md)
        subprocess.check_call(["cp", prism_bin, proxy])
        prism = subprocess.Popen([proxy, "serve", "--config", cfg], stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(work, "log"), "w"))
        procs.append(prism)
        wait_port(port)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        n = [0]

        def read(key):
            n[0] += 1
            body = json.dumps({"jsonrpc": "2.0", "id": n[0], "method": "eth_getBalance",
                               "params": ["0x%040x" % n[0], "latest"]})
            started = time.perf_counter()
            conn.request("POST", "/", body, {"content-type": "application/json", "x-api-key": key})
            r = conn.getresponse()
            out = json.loads(r.read())
            took = time.perf_counter() - started
            assert "result" in out, out
            if key == "verified-key":
                assert r.getheader("x-prism-verified") == "2", out
            return took

        # Until both providers' heads are known (a verified read pins the block to the lower one).
        for _ in range(200):
            try:
                read("verified-key")
                break
            except AssertionError:
                time.sleep(0.05)
        for _ in range(200):
            read("plain-key")
            read("verified-key")
        figures = {"plain-key": [[], 0.0, 0.0], "verified-key": [[], 0.0, 0.0]}
        for _ in range(rounds):
            for key in ("plain-key", "verified-key"):
                calls, cpu = metric_sum(admin, "prism_upstream_attempts_total"), cpu_s(prism.pid)
                figures[key][0].extend(read(key) for _ in range(per_round))
                figures[key][1] += metric_sum(admin, "prism_upstream_attempts_total") - calls
                figures[key][2] += cpu_s(prism.pid) - cpu
        for key, (lat, calls, cpu) in figures.items():
            reads = len(lat)
            print(json.dumps({
                "key": key,
                "reads": reads,
                "p50_ms": round(quantile(lat, 0.5) * 1000, 3),
                "p99_ms": round(quantile(lat, 0.99) * 1000, 3),
                "upstream_calls_per_read": round(calls / reads, 3),
                "prism_cpu_us_per_read": round(cpu / reads * 1e6, 1),
            }), flush=True)
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    main()
