#!/usr/bin/env python3
"""Sends exactly N JSON-RPC POSTs over keep-alive connections and checks every answer.

  rpc_client.py PORT N [CONC]     CONC connections (threads), N split between them; default 1

Used by perf/callgrind.sh: the client is a separate process, never under callgrind.
"""
import http.client
import sys
import threading
import time

BODY = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'


def worker(port, n, errors):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(n):
        c.request("POST", "/", BODY, {"content-type": "application/json"})
        r = c.getresponse()
        d = r.read()
        if r.status != 200 or b'"result":"0x1"' not in d or b'"id":1' not in d:
            errors.append((r.status, d[:200]))
    c.close()


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    conc = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    errors = []
    t0 = time.time()
    share = [n // conc + (1 if i < n % conc else 0) for i in range(conc)]
    threads = [threading.Thread(target=worker, args=(port, k, errors)) for k in share]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.time() - t0
    print(f"{n} requests over {conc} connection(s) in {dt:.2f}s, {len(errors)} bad", file=sys.stderr)
    if errors:
        print(f"first bad answer: {errors[0]}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
