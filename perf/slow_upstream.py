#!/usr/bin/env python3
"""A JSON-RPC upstream with a fixed service time, for scenarios where requests must overlap (page loads).
Echoes each request's id; eth_chainId answers 4663, eth_blockNumber a fixed head, everything else "0x1".
Usage: slow_upstream.py PORT [DELAY_MS]"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DELAY = (float(sys.argv[2]) if len(sys.argv) > 2 else 30.0) / 1000.0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        result = {"eth_chainId": "0x1237", "eth_blockNumber": "0x100000"}.get(req.get("method"), "0x1")
        if req.get("method") not in ("eth_chainId", "eth_blockNumber"):
            time.sleep(DELAY)
        body = json.dumps({"jsonrpc": "2.0", "id": req.get("id"), "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
