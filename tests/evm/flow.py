"""A real web3.py client's ordinary flow against one JSON-RPC endpoint (Prism in the tests).

    python3 flow.py <http url> [ws url] [account index]

Reads the chain id, a block and a balance; deploys Probe (probe.json) with a locally signed transaction and
waits for the receipt; calls set(9) and reads it back; sends a value transfer; calls the two reverting
functions and records the error as web3.py raised it and as the raw JSON-RPC error; subscribes to newHeads
over WebSocket and collects three heads. Prints one JSON object on stdout; exits non-zero when a step fails.
"""

import asyncio
import json
import pathlib
import sys

from web3 import AsyncWeb3, Web3
from web3.exceptions import ContractCustomError, ContractLogicError, Web3RPCError
from web3.providers.persistent import WebSocketProvider

# ganache --wallet.deterministic keys.
DEV_KEYS = [
    "0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d",
    "0x6cbed15c793ce57650b9877cf6fa156fbef513c4e6134f022a85b1ffdd59b2a1",
    "0x6370fd033278c143179d81c5526140625662b8daa446c22ee2d73db3707e620c",
    "0x646f1ce2fdad0e6deeeb5c7e8e5543bdde65e86029e2fd9fc169899c440a7913",
]


def step(name):
    print(f"[flow.py] {name}", file=sys.stderr, flush=True)


def main():
    if len(sys.argv) < 2:
        print("usage: python3 flow.py <http url> [ws url] [account index]", file=sys.stderr)
        return 2
    http_url = sys.argv[1]
    ws_url = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else "ws" + http_url[len("http"):]
    key = DEV_KEYS[int(sys.argv[3]) if len(sys.argv) > 3 else 2]
    probe = json.loads((pathlib.Path(__file__).parent / "probe.json").read_text())

    w3 = Web3(Web3.HTTPProvider(http_url, request_kwargs={"timeout": 20}))
    acct = w3.eth.account.from_key(key)
    out = {"client": "web3.py", "account": acct.address, "txHashes": []}

    step("chain id, block, balance")
    out["chainId"] = w3.eth.chain_id
    block = w3.eth.get_block("latest")
    out["block"] = {"number": block["number"], "hash": block["hash"].to_0x_hex()}
    out["balanceWei"] = str(w3.eth.get_balance(acct.address))

    def send(tx):
        tx.setdefault("from", acct.address)
        tx.setdefault("chainId", 4663)
        tx["nonce"] = w3.eth.get_transaction_count(acct.address, "pending")
        tx.setdefault("gas", w3.eth.estimate_gas(tx))
        tx["gasPrice"] = w3.eth.gas_price
        signed = acct.sign_transaction(tx)
        h = w3.eth.send_raw_transaction(signed.raw_transaction)
        out["txHashes"].append(h.to_0x_hex())
        return w3.eth.wait_for_transaction_receipt(h, timeout=30, poll_latency=0.2)

    step("deploy Probe")
    Probe = w3.eth.contract(abi=probe["abi"], bytecode=probe["bytecode"])
    receipt = send(Probe.constructor().build_transaction({"from": acct.address, "gasPrice": 0, "nonce": 0}) | {})
    out["deployStatus"] = receipt["status"]
    out["contract"] = receipt["contractAddress"]
    probe_at = w3.eth.contract(address=receipt["contractAddress"], abi=probe["abi"])

    step("write set(9) and read it back")
    tx = probe_at.functions.set(9).build_transaction({"from": acct.address, "gasPrice": 0, "nonce": 0})
    receipt = send({k: v for k, v in tx.items() if k in ("to", "data", "value", "gas")})
    out["setStatus"] = receipt["status"]
    out["value"] = probe_at.functions.value().call()
    events = probe_at.events.Set().get_logs(from_block=receipt["blockNumber"], to_block=receipt["blockNumber"])
    out["setLogs"] = [{"who": e["args"]["who"], "value": e["args"]["value"]} for e in events]

    step("value transfer")
    receipt = send({"to": Web3.to_checksum_address(w3.eth.account.from_key(DEV_KEYS[0]).address), "value": 54321})
    out["transferStatus"] = receipt["status"]

    step("reverting calls")
    out["reverts"] = {}
    for fn in ("fail", "failCustom"):
        rec = {"reverted": False}
        try:
            getattr(probe_at.functions, fn)().call({"from": acct.address})
        except (ContractLogicError, ContractCustomError) as e:
            rec = {"reverted": True, "exception": type(e).__name__, "message": e.message, "data": e.data}
        except Web3RPCError as e:
            # web3.py recognises a revert by "execution reverted" in the message; ganache words it otherwise,
            # so the node's error object arrives whole.
            err = (e.rpc_response or {}).get("error") or {}
            rec = {
                "reverted": True,
                "exception": type(e).__name__,
                "code": err.get("code"),
                "message": err.get("message"),
                "data": err.get("data"),
            }
        # The same call as raw JSON-RPC, so the error object can be compared with what the node says.
        data = probe_at.encode_abi(fn, args=[])
        raw = w3.provider.make_request("eth_call", [{"from": acct.address, "to": probe_at.address, "data": data}, "latest"])
        rec["rawError"] = raw.get("error")
        out["reverts"][fn] = rec

    step("newHeads over WebSocket")
    out["heads"] = asyncio.run(heads(ws_url, 3))

    print(json.dumps(out))
    return 0


async def heads(ws_url, n):
    got = []

    async def collect():
        async with AsyncWeb3(WebSocketProvider(ws_url)) as aw3:
            await aw3.eth.subscribe("newHeads")
            async for msg in aw3.socket.process_subscriptions():
                got.append(int(msg["result"]["number"]))
                if len(got) == n:
                    return

    await asyncio.wait_for(collect(), timeout=20)
    return got


if __name__ == "__main__":
    sys.exit(main())
