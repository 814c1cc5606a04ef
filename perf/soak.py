#!/usr/bin/env python3
"""Soak: Prism (one shard, its defaults) in front of three fast upstreams at a fixed rate of distinct
`eth_getBalance` calls over keep-alive connections, while one provider flaps: every FLAP_EVERY s it is
frozen (SIGSTOP) for FLAP_FOR s, as an overloaded node stalls, then resumed. Calls caught on it are hedged
or retried on the other two, which need more connections meanwhile. Prints one line every 5 s: Prism's
RSS, the rate reached, errors, and Prism's open connections to each provider (ESTABLISHED sockets in
/proc/net/tcp); then the summary: RSS once warm (at 10 s), its highest, at the end of the load, and after a
quiet spell (surplus upstream connections closed and their memory returned?). Stops by itself.

Usage: soak.py PRISM_BIN [RATE] [SECONDS] [QUIET]   (defaults 1500 calls/s, 60 s, 15 s quiet)
Environment: FLAP=stop|kill (kill: SIGKILL and restart, a node that crashes), FLAP_EVERY=10, FLAP_FOR=3,
CONNS=64 client connections.
"""
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from loopback import free_port, rss_kib, stop_all, wait_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def upstream_bin():
    path = os.path.join(ROOT, "target/perf/fast_upstream")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        subprocess.check_call(["rustc", "--edition", "2021", "-C", "opt-level=3",
                               os.path.join(ROOT, "examples/fast_upstream.rs"), "-o", path])
    return path


def start_upstream(port):
    return subprocess.Popen([upstream_bin(), f"127.0.0.1:{port}", "4663"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def established_to(ports):
    """Open TCP connections to each port in `ports` (the remote end), from /proc/net/tcp."""
    counts = {p: 0 for p in ports}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            cols = line.split()
            if cols[3] != "01":
                continue
            port = int(cols[2].rsplit(":", 1)[1], 16)
            if port in counts:
                counts[port] += 1
    return counts


def body(i):
    return (b'{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x%040x","latest"]}'
            % (i, (i * 2654435761) % (1 << 160)))


async def client(port, due, next_call, stats, stop_at):
    """One keep-alive connection: takes the next due call, waits for its time, sends it, reads the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    loop = asyncio.get_running_loop()
    while True:
        i = next_call[0]
        next_call[0] += 1
        at = due(i)
        if at >= stop_at:
            break
        wait = at - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        b = body(i)
        writer.write(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                     % (len(b), b))
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n")
                          if l.lower().startswith(b"content-length"))
            answer = await reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError, StopIteration):
            stats["errors"] += 1
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            continue
        stats["done"] += 1
        if b'"result"' not in answer:
            stats["errors"] += 1
    writer.close()


async def load(port, rate, seconds, conns, stats, on_tick):
    loop = asyncio.get_running_loop()
    t0 = loop.time() + 0.1
    stop_at = t0 + seconds
    next_call = [0]
    tasks = [asyncio.create_task(client(port, lambda i: t0 + i / rate, next_call, stats, stop_at))
             for _ in range(conns)]
    while loop.time() < stop_at:
        await asyncio.sleep(0.25)
        on_tick(loop.time() - t0)
    await asyncio.gather(*tasks)


def main():
    prism_bin = sys.argv[1]
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 60
    quiet = float(sys.argv[4]) if len(sys.argv) > 4 else 15
    flap = os.environ.get("FLAP", "stop")
    flap_every = float(os.environ.get("FLAP_EVERY", "10"))
    flap_for = float(os.environ.get("FLAP_FOR", "3"))
    conns = int(os.environ.get("CONNS", "64"))
    work = tempfile.mkdtemp(prefix="soak.")
    procs, ups = [], []
    try:
        ports = [free_port() for _ in range(3)]
        ups.extend(start_upstream(p) for p in ports)
        procs.extend(ups)
        for p in ports:
            wait_port(p)
        port, admin = free_port(), free_port()
        cfg = os.path.join(work, "config.toml")
        with open(cfg, "w") as f:
            f.write(f'[server]\nlisten = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 1\n'
                    f'pin_cores = false\n\n[limits]\nrequest_deadline_ms = 5000\n\n'
                    f'[[networks]]\nname = "bench"\nkind = "evm"\nchain_id = 4663\nprobe_interval_ms = 500\n')
            for i, p in enumerate(ports):
                f.write(f'\n  [[networks.providers]]\n  name = "p{i}"\n  url = "http://127.0.0.1:{p}"\n')
        exe = os.path.join(work, "rpc-proxy")  # a neutral name: see perf/README.md
        shutil.copy(prism_bin, exe)
        prism = subprocess.Popen([exe, "serve", "--config", cfg], stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(work, "proxy.log"), "w"))
        procs.append(prism)
        wait_port(port)
        time.sleep(1.0)
        idle = rss_kib([prism.pid])
        stats = {"done": 0, "errors": 0}
        samples = []  # (t, rss KiB)
        state = {"frozen": False, "next_flap": flap_every, "thaw_at": None, "printed": 0.0, "done_at": 0}

        def tick(t):
            if prism.poll() is not None:
                raise SystemExit(f"Prism exited ({prism.returncode}); log in {work}")
            if not state["frozen"] and t >= state["next_flap"]:
                if flap == "kill":
                    ups[0].kill()
                    ups[0].wait()
                else:
                    ups[0].send_signal(signal.SIGSTOP)
                state["frozen"], state["thaw_at"] = True, t + flap_for
            elif state["frozen"] and t >= state["thaw_at"]:
                if flap == "kill":
                    ups[0] = start_upstream(ports[0])
                    procs.append(ups[0])
                else:
                    ups[0].send_signal(signal.SIGCONT)
                state["frozen"], state["next_flap"] = False, t + flap_every - flap_for
            rss = rss_kib([prism.pid])
            samples.append((t, rss))
            if t - state["printed"] >= 5:
                conns_now = established_to(ports)
                reached = (stats["done"] - state["done_at"]) / (t - state["printed"])
                state["printed"], state["done_at"] = t, stats["done"]
                print(f"t={t:5.1f}s  RSS {rss / 1024:6.1f} MiB  {reached:6.0f} calls/s  errors {stats['errors']}  "
                      f"upstream connections {[conns_now[p] for p in ports]}"
                      + ("  (p0 frozen)" if state["frozen"] else ""), flush=True)

        asyncio.run(load(port, rate, seconds, conns, stats, tick))
        if state["frozen"] and flap != "kill":
            ups[0].send_signal(signal.SIGCONT)
        end = rss_kib([prism.pid])
        end_conns = established_to(ports)
        time.sleep(quiet)
        after = rss_kib([prism.pid])
        after_conns = established_to(ports)
        warm = next((r for t, r in samples if t >= 10), samples[0][1])
        peak = max(r for _, r in samples)
        print(f"calls {stats['done']} ({stats['done'] / seconds:.0f}/s), errors {stats['errors']}")
        print(f"RSS MiB: idle {idle / 1024:.1f}, warm (10 s) {warm / 1024:.1f}, highest {peak / 1024:.1f} "
              f"({100.0 * (peak - warm) / warm:+.1f} % over warm), end of load {end / 1024:.1f}, "
              f"{quiet:.0f} s later {after / 1024:.1f}")
        print(f"upstream connections at the end of load {[end_conns[p] for p in ports]}, "
              f"{quiet:.0f} s later {[after_conns[p] for p in ports]}")
    finally:
        for u in ups:
            try:
                u.send_signal(signal.SIGCONT)
            except OSError:
                pass
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
