#!/usr/bin/env python3
"""A real solana-py client flow against Prism's magic router (run by tests/solana_client.rs).

usage: flow.py URL FIXTURES_JSON SESSION:MODE [SESSION:MODE ...]

Each SESSION:MODE runs concurrently with its own AsyncClient (header x-prism-session: SESSION when SESSION is
not "-"). MODE "er": the blockhash comes from getBlockhashForAccounts([alice]) (MagicBlock's compat method, a
plain JSON-RPC POST), the transaction writes alice; MODE "base": get_latest_blockhash, a transfer payer ->
bob. Then send_transaction with skip_confirmation=False and last_valid_block_height, so solana-py itself
confirms: it polls getBlockHeight against last_valid_block_height and getSignatureStatuses value[0]. Then
get_account_info / get_balance of the written account.

Prints one JSON line per flow: {"session","mode","blockhash","last_valid","signature","lamports","balance"}
and exits 0; on any failure prints {"session","mode","error"} and exits 1.
"""
import asyncio
import json
import sys

try:
    import httpx2 as httpx  # what solana-py 0.41 uses underneath
except ImportError:
    import httpx
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed

try:  # solana-py >= 0.41
    from solana.rpc.models import TxOpts
except ImportError:  # older releases
    from solana.rpc.types import TxOpts
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction


async def flow(url, fx, session, mode, nonce):
    headers = {} if session == "-" else {"x-prism-session": session}
    payer = Keypair.from_bytes(bytes(fx["accounts"]["payer"]["secret"]))
    alice = Pubkey.from_string(fx["accounts"]["alice"]["pubkey"])
    bob = Pubkey.from_string(fx["accounts"]["bob"]["pubkey"])
    program = Pubkey.from_string(fx["accounts"]["program"]["pubkey"])
    out = {"session": session, "mode": mode}
    client = AsyncClient(url, commitment=Confirmed, extra_headers=headers, http2=False)
    try:
        if mode == "er":
            async with httpx.AsyncClient() as h:
                body = {"jsonrpc": "2.0", "id": 1, "method": "getBlockhashForAccounts", "params": [[str(alice)]]}
                r = (await h.post(url, json=body, headers=headers)).json()
            if "result" not in r:
                raise RuntimeError(f"getBlockhashForAccounts: {r}")
            # MagicBlock's router answers the bare {blockhash, lastValidBlockHeight}.
            blockhash = Hash.from_string(r["result"]["blockhash"])
            last_valid = r["result"]["lastValidBlockHeight"]
            ix = Instruction(program, b"\x05flow" + nonce.to_bytes(4, "little"), [AccountMeta(alice, False, True)])
            target = alice
        else:
            resp = await client.get_latest_blockhash(Confirmed)
            blockhash = resp.value.blockhash
            last_valid = resp.value.last_valid_block_height
            ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=bob, lamports=1000 + nonce))
            target = bob
        out["blockhash"] = str(blockhash)
        out["last_valid"] = last_valid
        msg = MessageV0.try_compile(payer.pubkey(), [ix], [], blockhash)
        tx = VersionedTransaction(msg, [payer])
        opts = TxOpts(skip_confirmation=False, preflight_commitment=Confirmed, last_valid_block_height=last_valid)
        sent = await client.send_transaction(tx, opts=opts)
        out["signature"] = str(sent.value)
        info = await client.get_account_info(target, commitment=Confirmed)
        out["lamports"] = info.value.lamports if info.value is not None else None
        out["balance"] = (await client.get_balance(target, commitment=Confirmed)).value
    except Exception as e:  # reported to the Rust test, which prints it
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        await client.close()
    return out


async def main():
    url, fixtures = sys.argv[1], sys.argv[2]
    with open(fixtures) as f:
        fx = json.load(f)
    jobs = [a.split(":", 1) for a in sys.argv[3:]]
    results = await asyncio.gather(*(flow(url, fx, s, m, i) for i, (s, m) in enumerate(jobs)))
    ok = True
    for r in results:
        print(json.dumps(r), flush=True)
        ok = ok and "error" not in r
    sys.exit(0 if ok else 1)


asyncio.run(main())
