#!/usr/bin/env python3
"""The cache's hit rate on a realistic read mix, against a real node that keeps mining (issue 37).

    perf/cache_mix.py [--prism BIN] [--seconds 30] [--clients 4] [--no-ws]

Starts anvil (tests/evm/node_modules, `--block-time 1`, `--slots-in-an-epoch 1000` so `finalized` lags the
head by ~2000 blocks as on an L2: nothing recent is final) with a background sender (a transfer every 250 ms),
and Prism in front of it (one shard, its defaults; the provider with its `ws_url` unless `--no-ws`). Clients
of a trading or payment backend then read, each call one of:

  30 %  eth_getBlockByNumber("latest")             never cacheable
  20 %  eth_getBlockByNumber(N) for N among the last 100 blocks (cacheable below cache_depth_blocks, 64)
  30 %  eth_getTransactionReceipt of one of the last 50 transactions sent (cacheable once mined)
  20 %  eth_getBalance(account, "latest")          never cacheable

Counts, per kind, the reads and those answered from the cache (`x-prism-cache: hit`), and prints one JSON
object. Run it with the binary before and after a change (`--prism`) for the same figures in both.
"""
import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANVIL = os.path.join(ROOT, "tests/evm/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")
ACCOUNTS = [
    "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Rpc:
    """Keep-alive JSON-RPC over HTTP/1.1; returns (result-or-error, headers)."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.id = 0

    def call(self, method, params):
        self.id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        for attempt in range(2):
            try:
                self.conn.request("POST", "/", body, {"content-type": "application/json"})
                r = self.conn.getresponse()
                data = r.read()
                return json.loads(data), dict(r.getheaders())
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                if attempt:
                    raise
        raise RuntimeError("unreachable")


def wait_answer(port, within=30):
    until = time.time() + within
    while time.time() < until:
        try:
            v, _ = Rpc(port).call("eth_chainId", [])
            if v.get("result"):
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"nothing answered on {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prism", default=os.path.join(ROOT, "target/release/prism"))
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--no-ws", action="store_true")
    ap.add_argument("--seed", type=int, default=37)
    a = ap.parse_args()
    procs = []
    tmp = tempfile.mkdtemp(prefix="cache_mix.")
    try:
        node_port = free_port()
        procs.append(subprocess.Popen(
            [ANVIL, "--host", "127.0.0.1", "--port", str(node_port), "--chain-id", "4663", "--silent",
             "--block-time", "1", "--slots-in-an-epoch", "1000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_answer(node_port)
        listen, admin = free_port(), free_port()
        ws = "" if a.no_ws else f'  ws_url = "ws://127.0.0.1:{node_port}"\n'
        config = os.path.join(tmp, "prism.toml")
        with open(config, "w") as f:
            f.write(f'[server]\nlisten = "127.0.0.1:{listen}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 1\n'
                    f'pin_cores = false\n\n[[networks]]\nname = "mix"\nkind = "evm"\nchain_id = 4663\n'
                    f'probe_interval_ms = 500\n\n  [[networks.providers]]\n  name = "anvil"\n'
                    f'  url = "http://127.0.0.1:{node_port}"\n{ws}')
        procs.append(subprocess.Popen([a.prism, "serve", "--config", config],
                                      stdout=open(os.path.join(tmp, "prism.log"), "w"), stderr=subprocess.STDOUT))
        wait_answer(listen)

        stop = threading.Event()
        sent = []
        lock = threading.Lock()

        def sender():
            node = Rpc(node_port)
            i = 0
            while not stop.is_set():
                v, _ = node.call("eth_sendTransaction", [{
                    "from": ACCOUNTS[1 + i % 2], "to": ACCOUNTS[0], "value": hex(1000 + i)}])
                if "result" in v:
                    with lock:
                        sent.append(v["result"])
                i += 1
                time.sleep(0.25)

        # Some history first: 100 blocks (the node mines one a second; these come at once), mined while
        # Prism runs, as a Prism that has been up a while has seen them go by. A first cacheable read starts
        # the heads feed where there is one (the cache asks for it).
        node = Rpc(node_port)
        first, _ = node.call("eth_sendTransaction", [{"from": ACCOUNTS[1], "to": ACCOUNTS[0], "value": "0x1"}])
        node.call("evm_mine", [])
        Rpc(listen).call("eth_getTransactionReceipt", [first["result"]])
        time.sleep(0.5)
        for _ in range(100):
            node.call("evm_mine", [])
        threading.Thread(target=sender, daemon=True).start()
        time.sleep(3)  # a few blocks with transactions in them

        kinds = ["latest block", "recent block", "receipt", "balance"]
        stats = {k: {"reads": 0, "hits": 0, "errors": 0} for k in kinds}

        def client(seed):
            rnd = random.Random(seed)
            prism = Rpc(listen)
            local = {k: {"reads": 0, "hits": 0, "errors": 0} for k in kinds}
            head = int(node_head(), 16)
            until = time.time() + a.seconds
            while time.time() < until:
                x = rnd.random()
                if x < 0.3:
                    kind, method, params = "latest block", "eth_getBlockByNumber", ["latest", False]
                elif x < 0.5:
                    kind = "recent block"
                    method, params = "eth_getBlockByNumber", [hex(max(0, head - rnd.randrange(100))), False]
                elif x < 0.8:
                    with lock:
                        recent = sent[-50:]
                    if not recent:
                        continue
                    kind, method, params = "receipt", "eth_getTransactionReceipt", [rnd.choice(recent)]
                else:
                    kind, method, params = "balance", "eth_getBalance", [ACCOUNTS[rnd.randrange(3)], "latest"]
                v, headers = prism.call(method, params)
                s = local[kind]
                s["reads"] += 1
                if "error" in v:
                    s["errors"] += 1
                if headers.get("x-prism-cache") == "hit":
                    s["hits"] += 1
                if kind == "latest block" and isinstance(v.get("result"), dict):
                    head = int(v["result"]["number"], 16)
            with lock:
                for k in kinds:
                    for f in local[k]:
                        stats[k][f] += local[k][f]

        def node_head():
            return Rpc(node_port).call("eth_blockNumber", [])[0]["result"]

        threads = [threading.Thread(target=client, args=(a.seed + i,)) for i in range(a.clients)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        stop.set()
        reads = sum(s["reads"] for s in stats.values())
        hits = sum(s["hits"] for s in stats.values())
        cacheable = stats["recent block"]["reads"] + stats["receipt"]["reads"]
        cacheable_hits = stats["recent block"]["hits"] + stats["receipt"]["hits"]
        print(json.dumps({
            "prism": a.prism,
            "ws": not a.no_ws,
            "seconds": round(elapsed, 1),
            "reads": reads,
            "answered_from_cache": round(hits / max(reads, 1), 3),
            "cacheable_kinds_hit_rate": round(cacheable_hits / max(cacheable, 1), 3),
            "by_kind": stats,
        }, indent=1))
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
