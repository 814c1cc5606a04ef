#!/usr/bin/env python3
"""What the magic router adds to a getAccountInfo: the same distinct calls sent straight to a fast Solana
upstream (examples/solana_upstream.rs, a base layer and an ER) and through Prism builds in front of it, one
keep-alive connection each, sequential, interleaved over rounds. Prints p50 / p90 per target and the p50
overhead (target p50 - direct p50). The accounts are touched once first, so the numbers are the steady state
(delegation table entries trusted, kept fresh by their record subscriptions).

usage: perf/solana_overhead.py NEW_PRISM [OLD_PRISM]      env: N (calls per round, 2000), ROUNDS (5),
       ACCOUNTS (200), PROXY_CPU / LOAD_CPU (taskset lists, "0" / "1")
Builds the upstream with `cargo build --release --example solana_upstream` when it is missing.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import free_port, read_answer, stop_all, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALPHABET = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
ER_IDENTITY = "2zEWBVtBjHqmQEeS1NsMKR3L5cahi5Ns2Vy9FvCPT2Pb"


def b58(raw):
    n = int.from_bytes(raw, "big")
    out = b""
    while n:
        n, r = divmod(n, 58)
        out = ALPHABET[r:r + 1] + out
    return (b"1" * (len(raw) - len(raw.lstrip(b"\0"))) + out).decode()


def free_pair():
    for _ in range(200):
        p = free_port()
        try:
            s = socket.socket()
            s.bind(("127.0.0.1", p + 1))
            s.close()
            return p
        except OSError:
            continue
    raise SystemExit("no free port pair")


def start_upstream(exe, identity, procs, cpu):
    port = free_pair()
    procs.append(subprocess.Popen(["taskset", "-c", cpu, exe, f"127.0.0.1:{port}", identity],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_port(port)
    wait_port(port + 1)
    return port


def start_prism(binary, name, base, er, procs, cpu):
    work = tempfile.mkdtemp(prefix=f"solperf-{name}-")
    port, admin = free_port(), free_port()
    cfg = os.path.join(work, "config.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 1\n'
                f'pin_cores = false\nws_listen = "off"\n\n[cache]\nenabled = false\ndedupe = false\n\n'
                f'[[networks]]\nname = "solana"\nkind = "solana-magic"\ndefault_er = "er-1"\n\n'
                f'  [[networks.providers]]\n  name = "base-1"\n  role = "base"\n'
                f'  url = "http://127.0.0.1:{base}"\n  ws_url = "ws://127.0.0.1:{base + 1}"\n\n'
                f'  [[networks.providers]]\n  name = "er-1"\n  role = "ephemeral"\n  identity = "{ER_IDENTITY}"\n'
                f'  url = "http://127.0.0.1:{er}"\n  ws_url = "ws://127.0.0.1:{er + 1}"\n')
    exe = os.path.join(work, "rpc-proxy")  # a neutral name (perf/README.md)
    shutil.copy(binary, exe)
    procs.append(subprocess.Popen(["taskset", "-c", cpu, exe, "serve", "--config", cfg],
                                  stdout=open(os.path.join(work, "proxy.log"), "w"), stderr=subprocess.STDOUT))
    wait_port(port)
    return port, admin


def metric(admin, name):
    """A counter from Prism's /metrics (summed over its label sets)."""
    s = socket.create_connection(("127.0.0.1", admin))
    s.sendall(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{admin}\r\n\r\n".encode())
    text = read_answer(s).decode()
    s.close()
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + " ") or l.startswith(name + "{"))


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.port = port

    def call(self, i, account):
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "getAccountInfo",
                           "params": [account, {"encoding": "base64", "commitment": "confirmed"}]}).encode()
        req = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        t = time.perf_counter_ns()
        self.sock.sendall(req)
        answer = read_answer(self.sock)
        took = time.perf_counter_ns() - t
        if b'"value"' not in answer:
            raise SystemExit(f"port {self.port}: unexpected answer {answer[:300]!r}")
        return took


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    builds = [("new", sys.argv[1])] + ([("old", sys.argv[2])] if len(sys.argv) > 2 else [])
    n, rounds, accounts = int(os.environ.get("N", 2000)), int(os.environ.get("ROUNDS", 5)), int(
        os.environ.get("ACCOUNTS", 200))
    proxy_cpu, load_cpu = os.environ.get("PROXY_CPU", "0"), os.environ.get("LOAD_CPU", "1")
    upstream = os.path.join(ROOT, "target/release/examples/solana_upstream")
    if not os.path.exists(upstream):
        subprocess.check_call(["cargo", "build", "-q", "--release", "--example", "solana_upstream"], cwd=ROOT)
    keys = [b58(os.urandom(32)) for _ in range(accounts)]
    procs = []
    try:
        base = start_upstream(upstream, "9hq3Fb5h4wDWM3fM6yqVj7Y2pDJd3Lhh3E8dgtjk2M1c", procs, load_cpu)
        er = start_upstream(upstream, ER_IDENTITY, procs, load_cpu)
        targets = {"direct": Client(base)}
        admins = {}
        for name, binary in builds:
            port, admins[name] = start_prism(binary, name, base, er, procs, proxy_cpu)
            targets[name] = Client(port)
        os.sched_setaffinity(0, {int(c) for c in load_cpu.split(",")})
        for name, c in targets.items():  # warm: every account tracked, its record read and subscribed
            for i, k in enumerate(keys):
                c.call(i, k)
        time.sleep(1.0)
        samples = {name: [] for name in targets}
        i = 1_000_000
        names = list(targets)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:  # a different order each round
                c = targets[name]
                for j in range(n):
                    i += 1
                    samples[name].append(c.call(i, keys[j % len(keys)]))
        direct = pct(samples["direct"], 0.5)
        print(f"getAccountInfo, {rounds} rounds x {n} sequential calls over {accounts} tracked accounts, one "
              f"keep-alive connection per target (Prism on cpu {proxy_cpu}, client and upstreams on {load_cpu})")
        print(f"{'target':<8} {'p50 µs':>8} {'p90 µs':>8} {'p50 overhead µs':>16}")
        for name, xs in samples.items():
            p50 = pct(xs, 0.5)
            extra = "" if name == "direct" else f"{(p50 - direct) / 1000:16.1f}"
            print(f"{name:<8} {p50 / 1000:8.1f} {pct(xs, 0.9) / 1000:8.1f} {extra}")
        for name, admin in admins.items():
            print(f"{name}: {metric(admin, 'prism_solana_record_reads_total'):.0f} delegation record reads for "
                  f"{accounts + rounds * n} calls (the warm-up's {accounts} plus the reread after each subscription)")
    finally:
        stop_all(procs)


if __name__ == "__main__":
    main()
