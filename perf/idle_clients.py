#!/usr/bin/env python3
"""Memory held by idle keep-alive clients: N client connections each send one distinct call, get its answer,
and stay open and silent. Prints the proxy's RSS before (started, idle), after the calls, and per idle
connection, then closes them all and reads the RSS again AFTER_S seconds later (is the memory given back?),
for Prism (1 shard, dedupe and cache off) and, when nginx is installed, an nginx worker in the same setup as
perf/compare.sh. Issue 15: Prism held ~17 KiB per idle connection; issue 40: <= 40 MiB at 10 000, and within
20 % of the idle figure 30 s after they closed. Stops by itself.

Usage: idle_clients.py PRISM_BIN [N] [AFTER_S]   (N 10000, AFTER_S 30; raises its own open-file limit; run
as root for N > ~500 000; NGINX=0 skips nginx)
"""
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from loopback import free_port, read_answer, rss_kib, start_fast_upstream, start_prism, stop_all, wait_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def call(sock, i):
    body = b'{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x%040x","latest"]}' % (i, i * 2654435761)
    sock.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
    try:
        rest = read_answer(sock)
    except RuntimeError:
        raise SystemExit(f"connection {i} closed before its answer")
    if b'"result"' not in rest:
        raise SystemExit(f"connection {i}: {rest[:200]!r}")


def measure(name, port, pids, n, connect_first, after_s):
    time.sleep(0.5)  # let start-up settle: the first reading is the idle process
    before = rss_kib(pids)
    socks, accepted = [], None
    if connect_first:
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
        time.sleep(1.0)
        accepted = rss_kib(pids)  # connected, nothing sent yet: what a connection costs before any byte
        for i, s in enumerate(socks):
            call(s, i)
    else:  # nginx drops some of 10 000 silent connections opened at once: one at a time there
        for i in range(n):
            socks.append(socket.create_connection(("127.0.0.1", port)))
            call(socks[-1], i)
    # Every connection answered; read RSS once the proxy has had a moment to give back what it took.
    time.sleep(1.0)
    after = rss_kib(pids)
    for s in socks:
        s.close()
    per = (after - before) / n if n else 0
    print(f"{name:<6} idle {before / 1024:6.1f} MiB   with {n} idle clients {after / 1024:6.1f} MiB   "
          f"{per:5.2f} KiB per idle connection"
          + (f" ({(accepted - before) / n:5.2f} KiB of it before the first byte)" if accepted is not None else ""),
          flush=True)
    time.sleep(after_s)
    closed = rss_kib(pids)
    print(f"{name:<6} {after_s:.0f} s after all {n} closed {closed / 1024:6.1f} MiB "
          f"({100.0 * (closed - before) / before:+.1f} % over idle)", flush=True)


def main():
    prism_bin = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    after_s = float(sys.argv[3]) if len(sys.argv) > 3 else 30
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 1000  # each process (this client, the proxy) holds one end of each connection
    if hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        except (ValueError, OSError):
            raise SystemExit(f"need {want} open files (hard limit {hard})")
    else:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    work = tempfile.mkdtemp(prefix="idleclients.")
    procs = []
    try:
        up = start_fast_upstream(ROOT, procs)
        port, p = start_prism(prism_bin, work, up, procs,
                              f"idle_timeout_ms = 600000\nmax_connections = {n + 100}")
        measure("prism", port, [p.pid], n, True, after_s)

        nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
        if nginx and os.environ.get("NGINX", "1") != "0":
            ng = os.path.join(work, "nginx")
            os.makedirs(os.path.join(ng, "logs"))
            ng_port = free_port()
            with open(os.path.join(ng, "nginx.conf"), "w") as f:
                f.write(f"""worker_processes 1;
daemon off;
master_process on;
user root;
pid {ng}/nginx.pid;
worker_rlimit_nofile {want};
error_log {ng}/logs/error.log warn;
events {{ worker_connections {n + 100}; }}
http {{
  access_log off;
  client_body_temp_path {ng}/body;
  proxy_temp_path {ng}/proxy;
  fastcgi_temp_path {ng}/fastcgi;
  uwsgi_temp_path {ng}/uwsgi;
  scgi_temp_path {ng}/scgi;
  keepalive_timeout 600s;
  keepalive_requests 1000000;
  upstream fast {{ server 127.0.0.1:{up}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{ng_port};
    location / {{ proxy_pass http://fast; proxy_http_version 1.1; proxy_set_header Connection ""; }}
  }}
}}
""")
            m = subprocess.Popen([nginx, "-p", ng, "-c", os.path.join(ng, "nginx.conf")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(m)
            wait_port(ng_port)
            workers = []
            for _ in range(100):
                workers = subprocess.run(["pgrep", "-P", str(m.pid)], capture_output=True, text=True).stdout.split()
                if workers:
                    break
                time.sleep(0.05)
            measure("nginx", ng_port, [m.pid] + [int(w) for w in workers], n, False, after_s)
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
