"""Loopback helpers the perf scripts share: a free port, waiting until something listens on one, the fast
upstream and a pass-through Prism in front of it, reading one HTTP answer, RSS, and stopping it all."""
import os
import shutil
import socket
import subprocess
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port):
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"nothing listens on {port}")


def rss_kib(pids):
    """Resident memory of the processes `pids`, summed, in KiB."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def start_fast_upstream(root, procs):
    """Builds (once) and starts examples/fast_upstream.rs on a free port; returns its port."""
    upstream = os.path.join(root, "target/perf/fast_upstream")
    if not os.path.exists(upstream):
        os.makedirs(os.path.dirname(upstream), exist_ok=True)
        subprocess.check_call(["rustc", "--edition", "2021", "-C", "opt-level=3",
                               os.path.join(root, "examples/fast_upstream.rs"), "-o", upstream])
    up = free_port()
    procs.append(subprocess.Popen([upstream, f"127.0.0.1:{up}", "4663"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
    wait_port(up)
    return up


def start_prism(prism_bin, work, upstream_port, procs, limits=""):
    """Starts Prism (1 shard, dedupe and cache off, `limits` as extra `[limits]` lines) in front of the
    upstream, from a copy named rpc-proxy (see perf/README.md); returns (port, process)."""
    port, admin = free_port(), free_port()
    cfg = os.path.join(work, "config.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 1\n'
                f'pin_cores = false\n\n[limits]\n{limits}\n\n'
                f'[cache]\nenabled = false\ndedupe = false\n\n'
                f'[[networks]]\nname = "bench"\nkind = "evm"\nchain_id = 4663\n\n'
                f'  [[networks.providers]]\n  name = "fast"\n  url = "http://127.0.0.1:{upstream_port}"\n')
    exe = os.path.join(work, "rpc-proxy")
    shutil.copy(prism_bin, exe)
    p = subprocess.Popen([exe, "serve", "--config", cfg], stdout=open(os.path.join(work, "proxy.log"), "w"),
                         stderr=subprocess.STDOUT)
    procs.append(p)
    wait_port(port)
    return port, p


def stop_all(procs):
    for p in reversed(procs):
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()


def read_answer(sock):
    """Reads one Content-Length HTTP answer from `sock`; returns its body."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("closed before its answer")
        got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length"))
    while len(rest) < length:
        rest += sock.recv(65536)
    return rest
