#!/usr/bin/env python3
"""A JSON-RPC upstream that is slow on a fraction of its calls, for hedging runs (perf/hedge.py).
Echoes each request's id; eth_chainId answers 4663, eth_blockNumber a fixed head, everything else "0x1".
Reads other than eth_chainId/eth_blockNumber sleep SLOW_MS with probability FRACTION.
Usage: flaky_upstream.py PORT [SLOW_MS] [FRACTION]"""
import json
import random
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOW = (float(sys.argv[2]) if len(sys.argv) > 2 else 300.0) / 1000.0
FRACTION = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method = req.get("method")
        result = {"eth_chainId": "0x1237", "eth_blockNumber": "0x100000"}.get(method, "0x1")
        if method not in ("eth_chainId", "eth_blockNumber") and random.random() < FRACTION:
            time.sleep(SLOW)
        body = json.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": result}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # a hedged-out call: Prism closed the connection


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
