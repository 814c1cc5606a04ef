#!/usr/bin/env python3
"""What a burst of large concurrent requests leaves Prism holding once it is over: C connections each send
R calls with a ~60 KB body at once (every read buffer and body buffer of the shard busy together), then all
go quiet (they stay open). Prints Prism's RSS idle, right after the burst, and every few seconds after it,
so the spare buffers the shard trims (`SpareBufs::trim`, every 5 s) show as memory given back. Stops by
itself.

Usage: burst_memory.py PRISM_BIN [C] [SECONDS]   (defaults 256 connections, watch 16 s)
"""
import os
import socket
import sys
import tempfile
import threading
import time
import shutil

from loopback import read_answer, rss_kib, start_fast_upstream, start_prism, stop_all

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROUNDS = 3
DATA_HEX = 60_000  # hex digits of the call's data: the body is ~60 KB, under the shard's 64 KiB keep bound


def client(sock, i, start, errors):
    start.wait()
    try:
        for r in range(ROUNDS):
            body = (b'{"jsonrpc":"2.0","id":%d,"method":"eth_call","params":[{"to":"0x%040x","data":"0x%s"},"latest"]}'
                    % (i * ROUNDS + r, i, b"ab" * (DATA_HEX // 2)))
            sock.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(body), body))
            answer = read_answer(sock)
            if b'"result"' not in answer:
                errors.append(answer[:200])
    except (OSError, RuntimeError) as e:
        errors.append(str(e))


def main():
    prism_bin = sys.argv[1]
    conns = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    watch = float(sys.argv[3]) if len(sys.argv) > 3 else 16.0
    work = tempfile.mkdtemp(prefix="burstmem.")
    procs = []
    try:
        up = start_fast_upstream(ROOT, procs)
        port, p = start_prism(prism_bin, work, up, procs,
                              f"idle_timeout_ms = 600000\nmax_connections = {conns + 100}")
        time.sleep(0.5)
        idle = rss_kib([p.pid])
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
        start, errors = threading.Event(), []
        threads = [threading.Thread(target=client, args=(s, i, start, errors)) for i, s in enumerate(socks)]
        for t in threads:
            t.start()
        began = time.monotonic()
        start.set()
        for t in threads:
            t.join()
        took = time.monotonic() - began
        if errors:
            raise SystemExit(f"{len(errors)} calls failed, first: {errors[0]!r}")
        after = rss_kib([p.pid])
        print(f"prism idle {idle / 1024:6.1f} MiB; {conns} connections x {ROUNDS} calls of ~{DATA_HEX // 1000} KB "
              f"in {took:.1f} s; right after {after / 1024:6.1f} MiB")
        ended = time.monotonic()
        line = []
        while time.monotonic() - ended < watch:
            time.sleep(2.0)
            line.append(f"{time.monotonic() - ended:4.0f} s {rss_kib([p.pid]) / 1024:6.1f}")
        print("after the burst (connections open, silent): " + ", ".join(line) + " MiB")
        for s in socks:
            s.close()
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
