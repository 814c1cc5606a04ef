#!/usr/bin/env python3
"""Sends exactly N JSON-RPC POSTs over keep-alive connections and checks every answer.

  rpc_client.py PORT N [CONC] [BODIES]   CONC connections (threads), N split between them; default 1
                                         BODIES=same (default): one eth_blockNumber body repeated;
                                         BODIES=distinct: every request a different eth_getBalance (its id
                                         and address vary, as in compare.sh), so dedupe never joins and the
                                         cache never hits; each answer must carry its own id

Used by perf/callgrind.sh: the client is a separate process, never under callgrind.
"""
import http.client
import itertools
import sys
import threading
import time

SAME = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
# One counter for all threads, so no two requests of a run (warm-up runs use another range) are the same.
_next = itertools.count(int(time.time() * 1000) % 1_000_000_000 * 1000)


def body(distinct):
    if not distinct:
        return SAME, b'"id":1'
    i = next(_next)
    b = '{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x%040x","latest"]}' % (
        i,
        (i * 2654435761) % (1 << 160),
    )
    return b.encode(), b'"id":%d' % i


def worker(port, n, distinct, errors):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(n):
        b, want_id = body(distinct)
        c.request("POST", "/", b, {"content-type": "application/json"})
        r = c.getresponse()
        d = r.read()
        if r.status != 200 or b'"result":"0x1"' not in d or want_id not in d:
            errors.append((r.status, d[:200]))
    c.close()


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    conc = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    bodies = sys.argv[4] if len(sys.argv) > 4 else "same"
    if bodies not in ("same", "distinct"):
        sys.exit("BODIES is same or distinct")
    errors = []
    t0 = time.time()
    share = [n // conc + (1 if i < n % conc else 0) for i in range(conc)]
    threads = [
        threading.Thread(target=worker, args=(port, k, bodies == "distinct", errors)) for k in share
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.time() - t0
    print(f"{n} {bodies} requests over {conc} connection(s) in {dt:.2f}s, {len(errors)} bad", file=sys.stderr)
    if errors:
        print(f"first bad answer: {errors[0]}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
