#!/usr/bin/env python3
"""Writes the committed seed corpora under fuzz/corpus/<target>/ from real inputs.

- envelope: every request of the conformance corpus (tests/conformance/corpus.jsonl), a few batches of
  them, the same call under every kind of id, and the edge cases the parser refuses on purpose.
- http_head: real request heads as clients send them (curl, ethers/undici, a browser's WebSocket upgrade,
  chunked uploads with extensions and trailers).
- solana_tx: the lead's fixtures (tests/fixtures/solana/fixtures.json): every transaction as base58 text,
  base64 text and wire bytes, and the address lookup table account.

Idempotent: files are named by the SHA-1 of their content. Run from anywhere: python3 fuzz/seed.py
"""

import hashlib
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "corpus"


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def envelope():
    lines = (ROOT / "tests/conformance/corpus.jsonl").read_text().splitlines()
    reqs = [json.loads(l)["request"] for l in lines if l.strip()]
    for r in reqs:
        put("envelope", json.dumps(r, separators=(",", ":")))
    for i in range(0, len(reqs), 5):
        put("envelope", json.dumps(reqs[i : i + 5], separators=(",", ":")))
    call = '{"jsonrpc":"2.0","id":%s,"method":"eth_getBalance","params":["0xffcf8fdee72ac11b5c542428b35eef5769c409f0","latest"]}'
    ids = ["0", "18446744073709551616123", "-42", "-0", "2.50", "1e3", "1e400", '""',
           r'"with \"quotes\", \\ and \u00e9 \ud83d\ude00"', "null", "true", "[1]", "{}"]
    for i in ids:
        put("envelope", call % i)
    put("envelope", "[" + ",".join(call % i for i in ids) + "]")
    for s in [
        '{"jsonrpc":"2.0","method":"eth_blockNumber"}',  # notification
        '{"jsonrpc":"2.0","id":1,"method":"eth_call","method":"eth_call"}',  # duplicate key
        '{"jsonrpc":"2.0","id":1,"id":2,"method":"eth_call"}',
        '{"jsonrpc":"2.0","x":1,"x":2,"id":1,"method":"m"}',
        '{"jsonrpc":"2.0","id":1,"method":"eth_c\\u0061ll","params":{"a":[1,{"b":null}]}}',
        '{"jsonrpc":"1.0","id":1,"method":"m"}',
        '{"jsonrpc":"2.0","id":1,"method":7}',
        '{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}',
        '{"jsonrpc":"2.0","id":1,"method":"m","params":[1e400,-1E-400,123456789012345678901234567890]}',
        "[]",
        "[1,2,3]",
        "[" + ",".join(['{"jsonrpc":"2.0","id":1,"method":"m"}'] * 21) + "]",
        "[" * 20 + "]" * 20,
        '{"a":' * 17 + "1" + "}" * 17,
        "  \r\n\t" + '{"jsonrpc":"2.0","id" : 1 ,"method" : "m" , "params" : [ ] }' + " \n",
        '"just a string"',
        "42",
        "{",
        '{"jsonrpc":"2.0","id":1,"method":"\xff"}',
    ]:
        put("envelope", s)


def http_head():
    body = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
    heads = [
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1:8545\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
        b"POST /rpc/mainnet HTTP/1.1\r\nhost: localhost:8545\r\nconnection: keep-alive\r\n"
        b"content-type: application/json\r\naccept: */*\r\naccept-language: *\r\nsec-fetch-mode: cors\r\n"
        b"user-agent: node\r\naccept-encoding: gzip, deflate\r\ncontent-length: %d\r\n\r\n" % len(body) + body,
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nx-api-key: k1\r\n\r\n"
        b"4;ext=1\r\n" + body[:4] + b"\r\n%x\r\n" % (len(body) - 4) + body[4:] + b"\r\n0\r\nX-Trailer: 1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
        b"POST / HTTP/1.0\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n[]",
        b"GET / HTTP/1.1\r\nHost: localhost:8545\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Origin: http://localhost:3000\r\nx-prism-session: abc\r\n\r\n",
        b"GET /status?x=1#frag HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer sekret\r\n\r\n",
        b"OPTIONS / HTTP/1.1\r\nHost: a\r\nOrigin: https://app.example\r\n"
        b"Access-Control-Request-Method: POST\r\n\r\n",
        b"HEAD /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\n",
        b"BREW /pot HTTP/1.1\r\n\r\n",
        b"5\r\nhello\r\n0\r\n\r\n",
        b"ffffffffffffffff\r\n",
        b"1;" + b"e" * 5000 + b"\r\nx\r\n0\r\n\r\n",
    ]
    for h in heads:
        put("http_head", h)


def solana_tx():
    fixtures = ROOT / "tests" / "fixtures" / "solana" / "fixtures.json"
    if not fixtures.is_file():
        return
    import base64

    doc = json.loads(fixtures.read_text())
    for name, tx in sorted(doc.get("transactions", {}).items()):
        for enc in ("base58", "base64"):
            if enc in tx:
                put("solana_tx", tx[enc])  # the text a client sends
        if "base64" in tx:
            put("solana_tx", base64.b64decode(tx["base64"]))  # the wire bytes
    alt = doc.get("alt", {})
    if "data_base64" in alt:
        put("solana_tx", base64.b64decode(alt["data_base64"]))  # an address lookup table account


if __name__ == "__main__":
    envelope()
    http_head()
    solana_tx()
    for t in sorted(OUT.iterdir()):
        print(t.name, len(list(t.iterdir())), "seeds")
