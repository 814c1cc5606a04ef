#!/usr/bin/env python3
"""What Prism's Solana router adds to a `getAccountInfo`: the same distinct reads (N accounts, each read once
to fill the delegation table first, then ROUNDS more times) sent one at a time over one keep-alive connection
directly to a fake base layer and through each Prism given, interleaved round by round; prints each one's
p50 / p99 latency and its p50 above the direct call. The fake is perf/solana_subs.py's (asyncio, ticking
slots), in a child process of its own so the client's timing is not the fake's.

Usage: solana_overhead.py PRISM_BIN [PRISM_BIN ...]   (env: N=200 ROUNDS=5)
"""
import http.client
import json
import multiprocessing
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import free_port, stop_all, wait_port  # noqa: E402
from solana_subs import ER_IDENTITY, Node, PROGRAM, SYSTEM, prism_config  # noqa: E402
from solders.pubkey import Pubkey  # noqa: E402


def keys(n):
    return [str(Pubkey.from_bytes(struct.pack("<I", i + 1) + bytes([9] * 28))) for i in range(n)]


def serve(base, er, n, ready):
    import asyncio

    async def main():
        for k in keys(n):
            base.accounts[k] = (1_000, SYSTEM, b"")
        await base.start(0.4)
        await er.start(0.05)
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


class Client:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port)

    def call(self, i, key):
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "getAccountInfo",
                           "params": [key, {"encoding": "base64"}]})
        started = time.perf_counter()
        self.conn.request("POST", "/", body, {"content-type": "application/json"})
        answer = self.conn.getresponse().read()
        took = time.perf_counter() - started
        if b'"lamports":1000' not in answer.replace(b" ", b""):
            raise SystemExit(f"unexpected answer: {answer[:200]!r}")
        return took


def main():
    bins = sys.argv[1:]
    if not bins:
        raise SystemExit(__doc__)
    n, rounds = int(os.environ.get("N", 200)), int(os.environ.get("ROUNDS", 5))
    base = Node("base", str(Pubkey.from_bytes(bytes([7] * 32))), 350_000_000)
    er = Node("er", ER_IDENTITY, 10_000)
    ready = multiprocessing.Event()
    fake = multiprocessing.Process(target=serve, args=(base, er, n, ready), daemon=True)
    fake.start()
    ready.wait(10)
    procs, targets = [], [("direct", base.http_port)]
    try:
        for k, b in enumerate(bins):
            work = tempfile.mkdtemp(prefix="solover.")
            port, admin = free_port(), free_port()
            exe = os.path.join(work, "rpc-proxy")
            shutil.copy(b, exe)
            procs.append(subprocess.Popen([exe, "serve", "--config", prism_config(work, port, admin, base, er, None)],
                                          stdout=open(os.path.join(work, "proxy.log"), "w"),
                                          stderr=subprocess.STDOUT))
            wait_port(port)
            targets.append((f"prism{k + 1} ({b})", port))
        time.sleep(1.5)
        clients = [(name, Client(port)) for name, port in targets]
        ks = keys(n)
        for _, c in clients:  # the delegation table fills: one record read per account
            for i, k in enumerate(ks):
                c.call(i, k)
        samples = {name: [] for name, _ in clients}
        for r in range(rounds):
            for name, c in clients:
                samples[name] += [c.call(r * n + i, k) for i, k in enumerate(ks)]
        direct = statistics.median(samples["direct"])
        for name, s in samples.items():
            s.sort()
            p50, p99 = statistics.median(s), s[int(len(s) * 0.99) - 1]
            extra = "" if name == "direct" else f"   +{(p50 - direct) * 1e6:6.1f} µs p50 over direct"
            print(f"{name:<40} p50 {p50 * 1e6:7.1f} µs   p99 {p99 * 1e6:7.1f} µs{extra}")
    finally:
        stop_all(procs)
        fake.terminate()


if __name__ == "__main__":
    main()
