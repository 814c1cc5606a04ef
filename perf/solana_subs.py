#!/usr/bin/env python3
"""Solana subscriptions at the scale SDK users bring: N client WebSocket sessions (a browser tab each, as
MagicBlock's Resolver opens one per tab) each follow K accounts with `accountSubscribe`; one account in K is
delegated to the ER, the others live on the base layer. Prints Prism's RSS idle and with every session
subscribed, the upstream WebSockets it holds open at each fake node (and how many account subscriptions each
carries), then has every followed account change once and counts the notifications the sessions receive
(all N x K must arrive, each once), then closes the sessions and counts what Prism still holds.

The base layer and the ER are fakes in this process (asyncio: HTTP JSON-RPC and a WebSocket server each, the
shapes real nodes send); Prism runs one shard. Needs the `websockets` and `solders` Python packages
(scripts/deps/solana.sh installs both with solana-py).

Usage: solana_subs.py PRISM_BIN [SESSIONS=1000] [PER_SESSION=5] [PER_SOCKET]
(PER_SOCKET sets limits.solana_subscriptions_per_socket; an older Prism without it takes none.)
Issue 36: before, one upstream socket per session and side (2 001 sockets for 1 000 x 5); see
docs/SOLANA_SUBSCRIPTIONS.md for the figures.
"""
import asyncio
import base64
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from solders.pubkey import Pubkey
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve

from loopback import free_port, rss_kib, stop_all, wait_port

PROGRAM = "DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh"
SYSTEM = "11111111111111111111111111111111"
ER_IDENTITY = str(Pubkey.from_bytes(bytes([42] * 32)))


def record_pda(account):
    return str(Pubkey.find_program_address([b"delegation", bytes(Pubkey.from_string(account))],
                                           Pubkey.from_string(PROGRAM))[0])


def record_data(authority, owner):
    return (struct.pack("<Q", 100) + bytes(Pubkey.from_string(authority)) + bytes(Pubkey.from_string(owner))
            + struct.pack("<QQQ", 1, 1_000_000, 30_000))


def account_json(lamports, owner, data=b""):
    return {"lamports": lamports, "owner": owner, "data": [base64.b64encode(data).decode(), "base64"],
            "executable": False, "rentEpoch": 0, "space": len(data)}


class Node:
    """A fake validator: HTTP JSON-RPC on one port, WebSocket PubSub on another."""

    def __init__(self, name, identity, slot):
        self.name, self.identity, self.slot = name, identity, slot
        self.accounts = {}  # pubkey -> (lamports, owner, data)
        self.conns = set()  # open WebSocket connections
        self.accepted = 0
        self.subs = {}  # subscription id -> (conn, pubkey)
        self.by_key = {}  # pubkey -> subscription ids
        self.next_sub = 1
        self.http_port, self.ws_port = free_port(), free_port()

    def answer(self, method, params):
        if method == "getHealth":
            return "ok"
        if method == "getSlot":
            return self.slot
        if method == "getIdentity":
            return {"identity": self.identity}
        if method == "getVersion":
            return {"solana-core": "2.2.0", "feature-set": 1}
        if method in ("getAccountInfo", "getBalance"):
            a = self.accounts.get(params[0])
            if method == "getBalance":
                value = a[0] if a else 0
            else:
                value = account_json(*a) if a else None
            return {"context": {"apiVersion": "2.2.0", "slot": self.slot}, "value": value}
        if method == "getLatestBlockhash":
            return {"context": {"slot": self.slot}, "value": {"blockhash": SYSTEM, "lastValidBlockHeight": 1}}
        raise KeyError(method)

    def reply(self, req):
        try:
            return {"jsonrpc": "2.0", "id": req.get("id"), "result": self.answer(req["method"], req.get("params", []))}
        except KeyError:
            return {"jsonrpc": "2.0", "id": req.get("id"), "error": {"code": -32601, "message": "Method not found"}}

    async def http(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n")
                               if l.lower().startswith(b"content-length")), 0)
                req = json.loads(await reader.readexactly(length))
                out = [self.reply(r) for r in req] if isinstance(req, list) else self.reply(req)
                body = json.dumps(out).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def ws(self, conn):
        self.conns.add(conn)
        self.accepted += 1
        try:
            async for text in conn:
                req = json.loads(text)
                method, params = req.get("method"), req.get("params", [])
                if method == "accountSubscribe":
                    sid = self.next_sub
                    self.next_sub += 1
                    self.subs[sid] = (conn, params[0])
                    self.by_key.setdefault(params[0], set()).add(sid)
                    out = {"jsonrpc": "2.0", "id": req["id"], "result": sid}
                elif method == "accountUnsubscribe":
                    ok = self.subs.get(params[0], (None,))[0] is conn
                    if ok:
                        self.drop_sub(params[0])
                    out = {"jsonrpc": "2.0", "id": req["id"], "result": ok}
                else:
                    out = self.reply(req)
                await conn.send(json.dumps(out))
        except Exception:
            pass
        finally:
            self.conns.discard(conn)
            for sid in [s for s, (c, _) in self.subs.items() if c is conn]:
                self.drop_sub(sid)

    def drop_sub(self, sid):
        _, key = self.subs.pop(sid)
        self.by_key.get(key, set()).discard(sid)

    def subscribed(self, accounts):
        """Subscriptions open here to any of `accounts`."""
        return sum(1 for (_, k) in self.subs.values() if k in accounts)

    async def change(self, account, lamports, owner=SYSTEM):
        """Sets `account` and notifies its subscribers, as a node does."""
        self.slot += 1
        self.accounts[account] = (lamports, owner, b"")
        note = {"context": {"slot": self.slot}, "value": account_json(lamports, owner)}
        for sid in list(self.by_key.get(account, ())):
            conn = self.subs[sid][0]
            msg = {"jsonrpc": "2.0", "method": "accountNotification",
                   "params": {"result": note, "subscription": sid}}
            try:
                await conn.send(json.dumps(msg))
            except Exception:
                pass

    async def tick(self, every):
        """Makes a slot every `every` seconds, as a validator does (Prism marks a node whose slot stands still
        as down)."""
        while True:
            await asyncio.sleep(every)
            self.slot += 1

    async def start(self, slot_time):
        self.ticker = asyncio.ensure_future(self.tick(slot_time))
        self.http_server = await asyncio.start_server(self.http, "127.0.0.1", self.http_port)
        self.ws_server = await serve(self.ws, "127.0.0.1", self.ws_port, compression=None, max_size=None,
                                     ping_interval=None, max_queue=None)


class Session:
    def __init__(self, port, accounts):
        self.port, self.accounts = port, accounts
        self.ids = {}  # subscription id -> account
        self.received = {}  # account -> notifications

    async def open(self):
        self.conn = await connect(f"ws://127.0.0.1:{self.port}/", compression=None, max_size=None,
                                  ping_interval=None, open_timeout=60, max_queue=None)
        for i, a in enumerate(self.accounts):
            await self.conn.send(json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "accountSubscribe",
                                             "params": [a, {"encoding": "base64", "commitment": "confirmed"}]}))
        pending = len(self.accounts)
        while pending:
            msg = json.loads(await self.conn.recv())
            if "id" in msg:
                if "result" not in msg:
                    raise SystemExit(f"accountSubscribe refused: {msg}")
                self.ids[msg["result"]] = self.accounts[msg["id"] - 1]
                pending -= 1
        self.reader = asyncio.ensure_future(self.read())

    async def read(self):
        try:
            async for text in self.conn:
                msg = json.loads(text)
                if msg.get("method") == "accountNotification":
                    a = self.ids.get(msg["params"]["subscription"])
                    self.received[a] = self.received.get(a, 0) + 1
        except Exception:
            pass

    async def close(self):
        await self.conn.close()
        self.reader.cancel()


def prism_config(work, port, admin, base, er, per_socket):
    cfg = os.path.join(work, "config.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\nadmin_listen = "127.0.0.1:{admin}"\nshards = 1\n'
                f'pin_cores = false\n\n[limits]\nmax_subscriptions_per_shard = 100000\n'
                + (f'solana_subscriptions_per_socket = {per_socket}\n' if per_socket else '') + '\n' +
                f'[[networks]]\nname = "solana"\nkind = "solana-magic"\ndelegation_program = "{PROGRAM}"\n\n'
                f'  [[networks.providers]]\n  name = "base-1"\n  role = "base"\n'
                f'  url = "http://127.0.0.1:{base.http_port}"\n  ws_url = "ws://127.0.0.1:{base.ws_port}"\n\n'
                f'  [[networks.providers]]\n  name = "er-1"\n  role = "ephemeral"\n  identity = "{ER_IDENTITY}"\n'
                f'  url = "http://127.0.0.1:{er.http_port}"\n  ws_url = "ws://127.0.0.1:{er.ws_port}"\n')
    return cfg


async def wait_for(what, cond, within):
    deadline = time.monotonic() + within
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def sockets_line(tag, base, er, followed):
    return (f"{tag}: upstream WebSockets open: base {len(base.conns)} (accepted {base.accepted}), "
            f"ER {len(er.conns)} (accepted {er.accepted}); account subscriptions there: base "
            f"{base.subscribed(followed)} (+ {len(base.subs) - base.subscribed(followed)} delegation records), "
            f"ER {er.subscribed(followed)}")


async def main():
    prism_bin = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    per = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    per_socket = int(sys.argv[4]) if len(sys.argv) > 4 else None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    base = Node("base", str(Pubkey.from_bytes(bytes([7] * 32))), 350_000_000)
    er = Node("er", ER_IDENTITY, 10_000)
    # Session i follows accounts (i, 0..per); (i, 0) is delegated to the ER.
    sessions_accounts = [[str(Pubkey.from_bytes(struct.pack("<II", i + 1, j + 1) + bytes(24))) for j in range(per)]
                         for i in range(n)]
    followed = {a for acc in sessions_accounts for a in acc}
    for acc in sessions_accounts:
        for j, a in enumerate(acc):
            base.accounts[a] = (1_000, SYSTEM, b"")
        delegated = acc[0]
        base.accounts[delegated] = (1_000, PROGRAM, b"")
        base.accounts[record_pda(delegated)] = (1_000_000, PROGRAM, record_data(ER_IDENTITY, SYSTEM))
        er.accounts[delegated] = (2_000, SYSTEM, b"")
    await base.start(0.4)
    await er.start(0.05)
    work = tempfile.mkdtemp(prefix="solsubs.")
    port, admin = free_port(), free_port()
    exe = os.path.join(work, "rpc-proxy")
    shutil.copy(prism_bin, exe)
    procs = [subprocess.Popen([exe, "serve", "--config", prism_config(work, port, admin, base, er, per_socket)],
                              stdout=open(os.path.join(work, "proxy.log"), "w"), stderr=subprocess.STDOUT)]
    try:
        await asyncio.get_running_loop().run_in_executor(None, wait_port, port)
        await asyncio.sleep(1.5)  # the first probes
        pid = procs[0].pid
        idle = rss_kib([pid])
        print(f"prism idle: {idle / 1024:.1f} MiB")
        sessions = [Session(port, acc) for acc in sessions_accounts]
        gate = asyncio.Semaphore(64)

        async def open_one(s):
            async with gate:
                await s.open()

        started = time.monotonic()
        await asyncio.gather(*(open_one(s) for s in sessions))
        took = time.monotonic() - started
        print(f"{n} sessions x {per} accounts subscribed in {took:.1f} s")
        await asyncio.sleep(2.0)
        held = rss_kib([pid])
        print(f"prism with {n} sessions: {held / 1024:.1f} MiB ({(held - idle) / n:.1f} KiB per session)")
        print(sockets_line("subscribed", base, er, followed))
        # Every followed account changes once, on the side it lives on.
        started = time.monotonic()
        for acc in sessions_accounts:
            await er.change(acc[0], 2_001)
            for a in acc[1:]:
                await base.change(a, 1_001)
        want = n * per
        got = lambda: sum(sum(s.received.values()) for s in sessions)
        try:
            await wait_for("every notification", lambda: got() >= want, 60)
        finally:
            print(f"notifications delivered: {got()} of {want} in {time.monotonic() - started:.2f} s")
        await asyncio.sleep(0.5)
        twice = sum(1 for s in sessions for c in s.received.values() if c > 1)
        if got() != want or twice:
            raise SystemExit(f"wrong delivery: {got()} for {want}, {twice} delivered more than once")
        await asyncio.gather(*(s.close() for s in sessions))
        await asyncio.sleep(3.0)
        print(sockets_line("3 s after every session closed", base, er, followed))
        print(f"prism after: {rss_kib([pid]) / 1024:.1f} MiB")
    finally:
        stop_all(procs)
        for node in (base, er):
            node.http_server.close()
            node.ws_server.close()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    asyncio.run(main())
