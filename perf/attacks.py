#!/usr/bin/env python3
"""What one bad input can cost: each attack of issue 13 against a real `prism serve`, one at a time.

    perf/attacks.py [PRISM_BINARY] [attack ...]      (default target/release/prism, every attack)

Attacks (each starts its own loopback providers and a fresh Prism, and stops by itself):
  backslash   a provider answers every call with the 3 bytes `{"\\`: is the process still alive 3 s later?
  head        a provider answers eth_blockNumber once with 0xffffffffffff: how many of the next 200 reads
              get -32603, and what /readyz says
  keys        one request of 80 000 distinct top-level keys to a 1-shard Prism: how long it takes, and how
              long a one-line eth_chainId sent meanwhile waits
  blame       five eth_simulateV1 calls the node answers with -38020 (the caller's mistake): how many of the
              next 100 valid reads get -32603 (the only provider's breaker opened or not)
  sighup      SIGHUP to a node without TLS: is the process still alive?

Prints one line per attack, so two binaries (before and after a fix) can be compared in one sitting.
Needs only python3; every process it starts is killed when it exits.
"""
import http.server
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

CHAIN_ID = "0x1237"  # 4663


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Provider:
    """A loopback JSON-RPC provider; `answer(method, req)` returns the raw response body bytes."""

    def __init__(self, answer):
        self.answer = answer
        self.head = 0x100
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(n)
                try:
                    req = json.loads(raw)
                except ValueError:
                    req = {}
                body = outer.reply(req)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass  # a client (Prism) that went away mid-answer is expected here

        self.server = S(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reply(self, req):
        if isinstance(req, list):
            return b"[" + b",".join(self.reply(r) for r in req) + b"]"
        method = req.get("method", "")
        custom = self.answer(method, req) if self.answer else None
        if custom is not None:
            return custom
        if method == "eth_chainId":
            result = CHAIN_ID
        elif method == "eth_blockNumber":
            self.head += 1
            result = hex(self.head)
        else:
            result = "0x0"
        return json.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": result}).encode()

    def stop(self):
        self.server.shutdown()


class Prism:
    def __init__(self, binary, providers, shards=2, extra=""):
        self.dir = tempfile.mkdtemp(prefix="prism-attack-")
        self.port, self.admin = free_port(), free_port()
        cfg = (
            f'[server]\nlisten = "127.0.0.1:{self.port}"\nadmin_listen = "127.0.0.1:{self.admin}"\n'
            f"shards = {shards}\npin_cores = false\n\n{extra}\n"
            '[[networks]]\nname = "net"\nkind = "evm"\nchain_id = 4663\nprobe_interval_ms = 200\n'
        )
        for i, p in enumerate(providers):
            cfg += f'\n  [[networks.providers]]\n  name = "p{i + 1}"\n  url = "http://127.0.0.1:{p.port}"\n'
        path = os.path.join(self.dir, "prism.toml")
        with open(path, "w") as f:
            f.write(cfg)
        self.log = open(os.path.join(self.dir, "prism.log"), "w")
        self.proc = subprocess.Popen(
            ["bash", "-c", f'ulimit -l 8192 2>/dev/null; exec "{binary}" serve --config "{path}"'],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise SystemExit(f"prism exited {self.proc.returncode} at start; see {self.log.name}")
                time.sleep(0.05)
        raise SystemExit("prism did not start listening")

    def call(self, method, params=None, ident=1, timeout=30):
        body = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            body["params"] = params
        return self.post(json.dumps(body).encode(), timeout)

    def post(self, data, timeout=30):
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/", data=data, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def readyz(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/readyz", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return "down"

    def alive(self):
        return self.proc.poll() is None

    def wait_serving(self, n):
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/status", timeout=2) as r:
                    st = json.loads(r.read())
                rows = st["networks"][0]["providers"]
                if sum(1 for p in rows if p.get("state") == "closed" and p.get("head", 0) > 0) >= n:
                    return
            except (OSError, KeyError, IndexError, ValueError):
                pass
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def failed(answer):
    return isinstance(answer, dict) and answer.get("error", {}).get("code") == -32603


def attack_backslash(binary):
    bad = Provider(lambda m, r: b'{"\\')
    good = Provider(None)
    p = Prism(binary, [good, bad])
    try:
        time.sleep(3)
        alive = p.alive()
        return f"process alive 3 s after a provider answered {{\"\\: {alive}" + (
            "" if alive else f" ({exit_note(p.proc.returncode)})"
        )
    finally:
        p.stop()
        bad.stop()
        good.stop()


def attack_head(binary):
    state = {"sent": False}

    def once(method, req):
        if method == "eth_blockNumber" and not state["sent"] and time.time() > state.get("after", 0):
            state["sent"] = True
            return json.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": "0xffffffffffff"}).encode()
        return None

    a, b, c = Provider(once), Provider(None), Provider(None)
    state["after"] = time.time() + 1.5  # let every provider be verified first
    p = Prism(binary, [a, b, c])
    try:
        p.wait_serving(3)
        deadline = time.time() + 10
        while not state["sent"] and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        bad = sum(failed(p.call("eth_getBalance", ["0x" + "11" * 20, "latest"], i)) for i in range(200))
        heads = [p.call("eth_blockNumber", [], i).get("result") for i in range(5)]
        absurd = any(h == "0xffffffffffff" for h in heads)
        return f"after one head of 0xffffffffffff: {bad}/200 reads got -32603, /readyz {p.readyz()}, absurd head returned: {absurd}"
    finally:
        p.stop()
        for x in (a, b, c):
            x.stop()


def attack_keys(binary, keys=80_000):
    good = Provider(None)
    p = Prism(binary, [good], shards=1, extra="[limits]\nmax_body_bytes = 4194304\n")
    try:
        p.wait_serving(1)
        obj = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}
        body = json.dumps(obj)[:-1] + "".join(f',"k{i}":0' for i in range(keys)) + "}"
        small = {}

        def probe():
            time.sleep(0.3)
            t = time.time()
            try:
                p.call("eth_chainId", [], 2, timeout=120)
            except OSError as e:
                small["error"] = type(e).__name__
            small["wait"] = time.time() - t

        th = threading.Thread(target=probe)
        th.start()
        t = time.time()
        p.post(body.encode(), timeout=120)
        big = time.time() - t
        th.join()
        probe_note = f" ({small['error']})" if "error" in small else ""
        return f"{keys} keys ({len(body) / 1e6:.1f} MB): answered in {big:.2f} s; an eth_chainId on the same shard waited {small.get('wait', float('nan')):.3f} s{probe_note}"
    finally:
        p.stop()
        good.stop()


def attack_blame(binary):
    def sim(method, req):
        if method == "eth_simulateV1":
            return json.dumps(
                {"jsonrpc": "2.0", "id": req.get("id"), "error": {"code": -38020, "message": "block numbers must be in order: 2 <= 3"}}
            ).encode()
        return None

    node = Provider(sim)
    p = Prism(binary, [node], extra="[policy.breaker]\nfailure_threshold = 5\nwindow_ms = 30000\ncooldown_ms = 15000\n")
    try:
        p.wait_serving(1)
        for i in range(5):
            p.call("eth_simulateV1", [{"blockStateCalls": []}, "latest"], i)
        bad = sum(failed(p.call("eth_getBalance", ["0x" + "22" * 20, "latest"], i)) for i in range(100))
        return f"after 5 eth_simulateV1 calls answered -38020: {bad}/100 valid reads got -32603"
    finally:
        p.stop()
        node.stop()


def exit_note(code):
    return f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"


def attack_sighup(binary):
    good = Provider(None)
    p = Prism(binary, [good])
    try:
        time.sleep(0.5)
        os.kill(p.proc.pid, signal.SIGHUP)
        time.sleep(1)
        alive = p.alive()
        return f"process alive 1 s after SIGHUP (no TLS): {alive}" + ("" if alive else f" ({exit_note(p.proc.returncode)})")
    finally:
        p.stop()
        good.stop()


ATTACKS = {
    "backslash": attack_backslash,
    "head": attack_head,
    "keys": attack_keys,
    "blame": attack_blame,
    "sighup": attack_sighup,
}


def main():
    args = sys.argv[1:]
    binary = "target/release/prism"
    if args and args[0] not in ATTACKS:
        binary = args.pop(0)
    binary = os.path.abspath(binary)
    for name in args or list(ATTACKS):
        try:
            line = ATTACKS[name](binary)
        except Exception as e:  # a hung or dead Prism is a finding, not a crash of the script
            line = f"ERROR {type(e).__name__}: {e}"
        print(f"{name:<10} {line}", flush=True)


if __name__ == "__main__":
    main()
