#!/usr/bin/env python3
"""Failover under fixed-rate load: three loopback upstreams behind one Prism; one dies mid-run.

Reports the read error rate clients saw and how long until traffic moved off the dead provider (the last
attempt Prism sent it, from /metrics, relative to the kill). Stops by itself.

Usage: failover.py PRISM_BIN FAST_UPSTREAM_BIN [RATE] [SECONDS] [KILL_AT]
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from loopback import free_port


def metric(admin, name, labels):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=2).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(l in line for l in labels):
            total += float(line.rsplit(" ", 1)[1])
    return total


def main():
    prism_bin, up_bin = sys.argv[1], sys.argv[2]
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 12
    kill_at = float(sys.argv[5]) if len(sys.argv) > 5 else 4
    work = tempfile.mkdtemp(prefix="failover.")
    procs = []
    ups = []
    try:
        for _ in range(3):
            port = free_port()
            p = subprocess.Popen([up_bin, f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p)
            ups.append((port, p))
        listen, admin = free_port(), free_port()
        cfg = os.path.join(work, "p.toml")
        with open(cfg, "w") as f:
            f.write(f'[server]\nlisten = "127.0.0.1:{listen}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 1\npin_cores = false\n')
            f.write('[limits]\nrequest_deadline_ms = 2000\nupstream_connect_timeout_ms = 200\n')
            f.write('[[networks]]\nname = "bench"\nkind = "evm"\nchain_id = 4663\nprobe_interval_ms = 500\n')
            for i, (port, _) in enumerate(ups):
                f.write(f'  [[networks.providers]]\n  name = "p{i}"\n  url = "http://127.0.0.1:{port}"\n')
        prism = subprocess.Popen([prism_bin, "serve", "--config", cfg], stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "log"), "w"))
        procs.append(prism)
        body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "eth_getBalance", "params": ["0x" + "ab" * 20, "latest"]}).encode()
        url = f"http://127.0.0.1:{listen}/"
        for _ in range(100):
            try:
                if b"result" in urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=1).read():
                    break
            except Exception:
                time.sleep(0.05)
        results = {"ok": 0, "error": 0}
        lock = threading.Lock()

        def one():
            try:
                out = json.loads(urllib.request.urlopen(urllib.request.Request(url, data=body, headers={"content-type": "application/json"}), timeout=3).read())
                good = out.get("id") == 7 and "result" in out
            except Exception:
                good = False
            with lock:
                results["ok" if good else "error"] += 1

        start = time.monotonic()
        killed_at = None
        dead_last_change = None
        dead_attempts = 0.0
        sent = 0
        threads = []
        while time.monotonic() - start < seconds:
            now = time.monotonic() - start
            if killed_at is None and now >= kill_at:
                ups[0][1].send_signal(signal.SIGKILL)
                killed_at = now
                dead_attempts = metric(admin, "prism_upstream_attempts_total", ['provider="p0"'])
                dead_last_change = now
            if killed_at is not None and int(now * 10) % 2 == 0:
                a = metric(admin, "prism_upstream_attempts_total", ['provider="p0"'])
                if a != dead_attempts:
                    dead_attempts, dead_last_change = a, now
            while sent < now * rate:
                t = threading.Thread(target=one)
                t.start()
                threads.append(t)
                sent += 1
            time.sleep(0.002)
        for t in threads:
            t.join()
        status = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{admin}/status", timeout=2).read())
        p0 = [p for p in status["networks"][0]["providers"] if p["name"] == "p0"][0]
        total = results["ok"] + results["error"]
        print(json.dumps({
            "rate": rate, "seconds": seconds, "requests": total, "errors": results["error"],
            "error_rate_pct": round(100.0 * results["error"] / max(total, 1), 3),
            "traffic_moved_after_ms": round((dead_last_change - killed_at) * 1000) if killed_at else None,
            "dead_provider_state": p0["state"],
        }))
    finally:
        for p in procs:
            try:
                p.kill()
            except Exception:
                pass


if __name__ == "__main__":
    main()
