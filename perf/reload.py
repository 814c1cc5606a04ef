#!/usr/bin/env python3
"""Reload cost: a Prism with KEYS keys and PROVIDERS providers (over five loopback upstreams) under keep-alive
load; the config is rewritten (a tenth of the keys rotated, a fifth of the providers replaced) and reloaded
with `POST /reload`. Prints how long the reload took (checked, and every shard running it), the longest a
shard paused to install it, and the slowest client call before and during the reload. Stops by itself.

Usage: reload.py PRISM_BIN [KEYS] [PROVIDERS]
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

from loopback import free_port, wait_port

HERE = os.path.dirname(os.path.abspath(__file__))


def config(listen, admin, ups, providers, keys, rotated):
    out = [f'[server]\nlisten = "127.0.0.1:{listen}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 2\npin_cores = false\n',
           "[limits]\nidle_timeout_ms = 60000\n[cache]\nenabled = false\ndedupe = false\n",
           '[[networks]]\nname = "bench"\nkind = "evm"\nchain_id = 4663\nprobe_interval_ms = 2000\n']
    for i in providers:
        out.append(f'  [[networks.providers]]\n  name = "p{i}"\n  url = "http://127.0.0.1:{ups[i % len(ups)]}"\n')
    for i in range(keys):
        secret = f"s{i}-r" if i < rotated else f"s{i}"
        out.append(f'[[keys]]\nname = "k{i}"\nkey = "{secret}"\n')
    return "".join(out)


def main():
    prism_bin = sys.argv[1]
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    providers = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    work = tempfile.mkdtemp(prefix="reload.")
    procs = []
    try:
        ups = []
        for _ in range(5):
            port = free_port()
            procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "flaky_upstream.py"), str(port), "0", "0"]))
            ups.append(port)
        for port in ups:
            wait_port(port)
        listen, admin = free_port(), free_port()
        cfg = os.path.join(work, "prism.toml")
        with open(cfg, "w") as f:
            f.write(config(listen, admin, ups, range(providers), keys, 0))
        procs.append(subprocess.Popen([prism_bin, "serve", "--config", cfg], stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(work, "log"), "w")))
        wait_port(listen)
        wait_port(admin)
        stop = threading.Event()
        reloading = threading.Event()
        worst = {"before": 0.0, "during": 0.0}
        counts = {"calls": 0, "errors": 0}
        lock = threading.Lock()

        def client(t):
            conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=5)
            n = t << 40
            while not stop.is_set():
                n += 1
                body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "eth_getBalance", "params": ["0x%040x" % n, "latest"]})
                started = time.monotonic()
                during = reloading.is_set()
                conn.request("POST", "/", body, {"content-type": "application/json", "x-api-key": f"s{keys - 1}"})
                resp = conn.getresponse()
                data = resp.read()
                took = (time.monotonic() - started) * 1000
                with lock:
                    counts["calls"] += 1
                    counts["errors"] += 0 if resp.status == 200 and b'"result"' in data else 1
                    key = "during" if during or reloading.is_set() else "before"
                    worst[key] = max(worst[key], took)

        threads = [threading.Thread(target=client, args=(t,)) for t in range(2)]
        for t in threads:
            t.start()
        while counts["calls"] < 2000:
            time.sleep(0.01)
        with open(cfg, "w") as f:
            f.write(config(listen, admin, ups, range(providers // 5, providers + providers // 5), keys, keys // 10))
        reloading.set()
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=30)
        conn.request("POST", "/reload", "", {"content-length": "0"})
        resp = conn.getresponse()
        outcome = json.loads(resp.read())
        took = (time.monotonic() - started) * 1000
        reloading.clear()
        calls_then = counts["calls"]
        while counts["calls"] < calls_then + 1000:
            time.sleep(0.01)
        stop.set()
        for t in threads:
            t.join()
        print(json.dumps({
            "keys": keys, "providers": providers, "status": resp.status,
            "reload_wall_ms": round(took, 1), "message": outcome.get("message"),
            "slowest_call_before_ms": round(worst["before"], 2), "slowest_call_during_ms": round(worst["during"], 2),
            "calls": counts["calls"], "errors": counts["errors"],
        }, indent=1))
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    main()
