#!/usr/bin/env python3
"""Whether a TLS server resumes sessions, as a client that keeps them sees it (perf/compare.sh TLS=1).

    python3 perf/tls_resume.py HOST:PORT [N]     prints "k of N resumed" (N reconnects after a first one)

Each connection sends one JSON-RPC call and reads the answer before closing: TLS 1.3 session tickets arrive
after the handshake, so a client must read once to have a session to offer next time.
"""
import socket
import ssl
import sys

BODY = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'


def one(host, port, ctx, session):
    raw = socket.create_connection((host, port), timeout=5)
    s = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
    s.sendall(b"POST / HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
              b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(BODY), BODY))
    while s.recv(65536):
        pass
    reused, session = s.session_reused, s.session
    s.close()
    return reused, session


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    _, session = one(host, int(port), ctx, None)
    resumed = 0
    for _ in range(n):
        reused, fresh = one(host, int(port), ctx, session)
        resumed += bool(reused)
        session = fresh or session
    print(f"{resumed} of {n} resumed")


if __name__ == "__main__":
    main()
