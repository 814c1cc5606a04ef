// Records the conformance corpus (tests/conformance/corpus.jsonl) from a real EVM node: ganache 7.9.2,
// chain id 4663, deterministic wallet, fixed genesis time, 12 s per block. A one-off; rerun with
//
//   mkdir -p /tmp/confnode && cd /tmp/confnode && npm init -y >/dev/null && npm install ganache@7.9.2
//   NODE_PATH=/tmp/confnode/node_modules node tests/conformance/record.mjs   # from the repository root
//
// It first builds chain state (unrecorded): value transfers, a tiny hand-assembled contract that emits a
// log, stores the block number, returns storage slot 0 and reverts with Error("nope") when the first
// calldata byte is 0x01, plus one mined transaction that reverted (status 0x0). Then it asks every method
// Prism's method table knows (src/rpc/methods.rs: KNOWN_METHODS and every name `lookup` matches), with
// good and bad params, over plain HTTP, and writes one line per exchange:
//
//   {"name": "...", "request": {"jsonrpc":"2.0","id":N,"method":"...","params":[...]}, "response": "<raw body>"}
//
// `response` is the node's HTTP body byte for byte (as a JSON string). Each (method, params) pair is asked
// once, so the replaying fake can look answers up by it. Reads come first, state-changing calls last.

import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(process.env.NODE_PATH ? path.join(process.env.NODE_PATH, "x.js") : import.meta.url);
const ganache = require("ganache");

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, "corpus.jsonl");

const server = ganache.server({
  chain: { chainId: 4663, networkId: 4663, time: new Date("2026-01-01T00:00:00Z") },
  wallet: { deterministic: true, totalAccounts: 4 },
  miner: { timestampIncrement: 12, instamine: "strict" },
  logging: { quiet: true },
});
await new Promise((ok, fail) => server.listen(0, "127.0.0.1", (e) => (e ? fail(e) : ok())));
const port = server.address().port;

let nextId = 1;
function post(body) {
  return new Promise((ok, fail) => {
    const req = http.request(
      { host: "127.0.0.1", port, method: "POST", path: "/", headers: { "content-type": "application/json" } },
      (res) => {
        const parts = [];
        res.on("data", (c) => parts.push(c));
        res.on("end", () => ok(Buffer.concat(parts).toString("utf8")));
      },
    );
    req.on("error", fail);
    req.end(body);
  });
}

/// A call that is not recorded (state set-up); throws on a JSON-RPC error.
async function rpc(method, params = []) {
  const raw = await post(JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }));
  const v = JSON.parse(raw);
  if (v.error) throw new Error(`${method} ${JSON.stringify(params)}: ${raw}`);
  return v.result;
}

const lines = [];
const seen = new Set();
/// A recorded call; returns the parsed answer.
async function rec(name, method, params = []) {
  const key = JSON.stringify([method, params]);
  if (seen.has(key)) throw new Error(`(method, params) asked twice: ${key}`);
  seen.add(key);
  const request = { jsonrpc: "2.0", id: nextId++, method, params };
  const response = await post(JSON.stringify(request));
  lines.push(JSON.stringify({ name, request, response }));
  return JSON.parse(response);
}

// ---- the contract, hand-assembled --------------------------------------------------------------------
const hex = (n, bytes) => n.toString(16).padStart(bytes * 2, "0");
const TOPIC = "0x" + "51".repeat(32);
const NOPE = Buffer.from("nope").toString("hex").padEnd(64, "0");
const ERROR_SEL = "08c379a0".padEnd(64, "0");
// [opcodes as hex, or {label}] ; "@label" = PUSH1 of a label's offset
const prog = [
  "36", "15", "@emit", "57", // CALLDATASIZE ISZERO PUSH1 emit JUMPI
  "6000", "35", "60f8", "1c", "6001", "14", "@revert", "57", // first byte == 1 → revert
  "6000", "54", "6000", "52", "6020", "6000", "f3", // return sload(0)
  { label: "emit" }, "5b", "33", "6000", "52", "43", "6000", "55", // mstore(0, caller); sstore(0, number)
  "7f" + TOPIC.slice(2), "6020", "6000", "a1", "00", // LOG1(0, 32, TOPIC); STOP
  { label: "revert" }, "5b",
  "7f" + ERROR_SEL, "6000", "52", "6020", "6004", "52", "6004", "6024", "52", "7f" + NOPE, "6044", "52",
  "6064", "6000", "fd", // REVERT(0, 100)
];
function assemble(p) {
  const labels = {};
  let at = 0;
  for (const op of p) {
    if (typeof op === "object") labels[op.label] = at;
    else at += op.startsWith("@") ? 2 : op.length / 2;
  }
  return p
    .filter((op) => typeof op !== "object")
    .map((op) => (op.startsWith("@") ? "60" + hex(labels[op.slice(1)], 1) : op))
    .join("");
}
const runtime = assemble(prog);
const rlen = runtime.length / 2;
// init: CODECOPY(0, 12, rlen); RETURN(0, rlen)
const init = "60" + hex(rlen, 1) + "600c" + "6000" + "39" + "60" + hex(rlen, 1) + "6000" + "f3";
const deployCode = "0x" + init + runtime;

// ---- chain state ------------------------------------------------------------------------------------
const accounts = await rpc("eth_accounts");
const [a0, a1, a2, a3] = accounts;
const wait = async (hash) => {
  for (;;) {
    const r = await rpc("eth_getTransactionReceipt", [hash]);
    if (r) return r;
  }
};
const send = async (tx) => wait(await rpc("eth_sendTransaction", [tx]));
const transfer1 = await send({ from: a0, to: a1, value: "0xde0b6b3a7640000" });
await send({ from: a1, to: a2, value: "0x1bc16d674ec80000" });
const deployed = await send({ from: a0, data: deployCode, gas: "0x30d40" });
const contract = deployed.contractAddress;
const emit1 = await send({ from: a2, to: contract, gas: "0x186a0" });
const emit2 = await send({ from: a1, to: contract, gas: "0x186a0" });
const reverted = await send({ from: a0, to: contract, data: "0x01", gas: "0x186a0" });
if (reverted.status !== "0x0") throw new Error(`expected a reverted receipt: ${JSON.stringify(reverted)}`);
await rpc("evm_mine");
// Signed now, sent at the end: two transactions of a3 with the same nonce; the first is accepted, the
// second then has a nonce that is too low. (a3 sends once first: ganache 7 treats a signed nonce of 0 as
// unset and accepts it again.)
await send({ from: a3, to: a1, value: "0x5" });
// And one signed at a nonce that two later transactions use up: plainly too low by the time it is sent.
const staleNonce = await rpc("eth_getTransactionCount", [a3, "latest"]);
const rawStale = (
  await rpc("eth_signTransaction", [
    { from: a3, to: a2, value: "0x3", gas: "0x5208", gasPrice: "0x77359400", nonce: staleNonce },
  ])
);
await send({ from: a3, to: a1, value: "0x6" });
await send({ from: a3, to: a1, value: "0x7" });
const nonce3 = await rpc("eth_getTransactionCount", [a3, "latest"]);
const signA3 = (value) =>
  rpc("eth_signTransaction", [{ from: a3, to: a0, value, gas: "0x5208", gasPrice: "0x77359400", nonce: nonce3 }]);
const rawOk = await signA3("0x2a");
const rawLow = await signA3("0x1");
const head = await rpc("eth_blockNumber");
const emitBlock = await rpc("eth_getBlockByNumber", [emit1.blockNumber, false]);

// ---- recorded exchanges: reads --------------------------------------------------------------------
const missingHash = "0x" + "ab".repeat(32);
await rec("head", "eth_blockNumber", []);
await rec("chain id", "eth_chainId", []);
await rec("network id", "net_version", []);
await rec("latest block", "eth_getBlockByNumber", ["latest", false]);
await rec("block with full transactions", "eth_getBlockByNumber", [emit1.blockNumber, true]);
await rec("block by number, hashes", "eth_getBlockByNumber", [transfer1.blockNumber, false]);
await rec("genesis", "eth_getBlockByNumber", ["earliest", false]);
await rec("block past the head: null", "eth_getBlockByNumber", ["0xffff", false]);
await rec("bad block tag", "eth_getBlockByNumber", ["nonsense", false]);
await rec("block by hash", "eth_getBlockByHash", [emitBlock.hash, true]);
await rec("block by unknown hash: null", "eth_getBlockByHash", [missingHash, false]);
await rec("balance", "eth_getBalance", [a1, "latest"]);
await rec("balance at an old block", "eth_getBalance", [a1, transfer1.blockNumber]);
await rec("balance, bad address", "eth_getBalance", ["0x1234", "latest"]);
await rec("balance, no params", "eth_getBalance", []);
await rec("code", "eth_getCode", [contract, "latest"]);
await rec("code of an account: 0x", "eth_getCode", [a0, "latest"]);
await rec("nonce", "eth_getTransactionCount", [a0, "latest"]);
await rec("nonce, pending", "eth_getTransactionCount", [a0, "pending"]);
await rec("storage slot 0", "eth_getStorageAt", [contract, "0x0", "latest"]);
await rec("storage slot 1 (empty)", "eth_getStorageAt", [contract, "0x1", "latest"]);
await rec("proof", "eth_getProof", [contract, ["0x0"], "latest"]);
await rec("call returning storage", "eth_call", [{ to: contract, data: "0x02" }, "latest"]);
await rec("call that reverts", "eth_call", [{ to: contract, data: "0x01" }, "latest"]);
await rec("call at an EIP-1898 block hash", "eth_call", [{ to: contract, data: "0x03" }, { blockHash: emitBlock.hash }]);
await rec("call, missing transaction object", "eth_call", []);
await rec("estimate gas", "eth_estimateGas", [{ from: a0, to: a1, value: "0x1" }]);
await rec("estimate gas of a revert", "eth_estimateGas", [{ from: a0, to: contract, data: "0x01" }]);
await rec("estimate gas beyond balance", "eth_estimateGas", [{ from: a3, to: a0, value: "0xffffffffffffffffffffffffffff" }]);
await rec("access list (not in ganache)", "eth_createAccessList", [{ from: a0, to: contract, data: "0x02" }, "latest"]);
await rec("transaction", "eth_getTransactionByHash", [emit1.transactionHash]);
await rec("unknown transaction: null", "eth_getTransactionByHash", [missingHash]);
await rec("transaction, bad hash", "eth_getTransactionByHash", ["0x12"]);
await rec("receipt with a log", "eth_getTransactionReceipt", [emit1.transactionHash]);
await rec("receipt of a contract creation", "eth_getTransactionReceipt", [deployed.transactionHash]);
await rec("receipt of a reverted transaction", "eth_getTransactionReceipt", [reverted.transactionHash]);
await rec("unknown receipt: null", "eth_getTransactionReceipt", [missingHash]);
await rec("block receipts (not in ganache)", "eth_getBlockReceipts", [emit1.blockNumber]);
await rec("transaction by block hash and index", "eth_getTransactionByBlockHashAndIndex", [emitBlock.hash, "0x0"]);
await rec("transaction by block hash, index out of range", "eth_getTransactionByBlockHashAndIndex", [emitBlock.hash, "0x5"]);
await rec("transaction by block number and index", "eth_getTransactionByBlockNumberAndIndex", [emit1.blockNumber, "0x0"]);
await rec("transaction count by hash", "eth_getBlockTransactionCountByHash", [emitBlock.hash]);
await rec("transaction count by number", "eth_getBlockTransactionCountByNumber", [emit1.blockNumber]);
await rec("uncle count by hash", "eth_getUncleCountByBlockHash", [emitBlock.hash]);
await rec("uncle count by number", "eth_getUncleCountByBlockNumber", [emit1.blockNumber]);
await rec("uncle by hash and index: null", "eth_getUncleByBlockHashAndIndex", [emitBlock.hash, "0x0"]);
await rec("uncle by number and index: null", "eth_getUncleByBlockNumberAndIndex", [emit1.blockNumber, "0x0"]);
await rec("fee history", "eth_feeHistory", ["0x3", "latest", [25, 75]]);
await rec("logs of the contract", "eth_getLogs", [{ fromBlock: "0x0", toBlock: "latest", address: contract }]);
await rec("logs by topic in one block", "eth_getLogs", [{ blockHash: emitBlock.hash, topics: [TOPIC] }]);
await rec("logs, none match", "eth_getLogs", [{ fromBlock: "0x0", toBlock: "latest", topics: ["0x" + "00".repeat(32)] }]);
await rec("logs, bad filter", "eth_getLogs", [{ fromBlock: "zz" }]);
await rec("gas price", "eth_gasPrice", []);
await rec("priority fee", "eth_maxPriorityFeePerGas", []);
await rec("blob base fee (not in ganache)", "eth_blobBaseFee", []);
await rec("syncing", "eth_syncing", []);
await rec("listening", "net_listening", []);
await rec("peer count", "net_peerCount", []);
await rec("client version", "web3_clientVersion", []);
await rec("sha3", "web3_sha3", ["0x68656c6c6f"]);
await rec("sha3, not hex", "web3_sha3", ["hello"]);
await rec("protocol version", "eth_protocolVersion", []);
await rec("accounts", "eth_accounts", []);
await rec("mining", "eth_mining", []);
await rec("hashrate", "eth_hashrate", []);
await rec("coinbase", "eth_coinbase", []);
await rec("trace a transaction", "debug_traceTransaction", [emit1.transactionHash, { disableStorage: true, disableMemory: true }]);
await rec("trace an unknown transaction", "debug_traceTransaction", [missingHash, {}]);
await rec("debug_traceCall (not in ganache)", "debug_traceCall", [{ to: contract, data: "0x02" }, "latest", {}]);
await rec("debug_traceBlockByNumber (not in ganache)", "debug_traceBlockByNumber", [emit1.blockNumber, {}]);
await rec("debug_traceBlockByHash (not in ganache)", "debug_traceBlockByHash", [emitBlock.hash, {}]);
await rec("trace_block (not in ganache)", "trace_block", [emit1.blockNumber]);
await rec("trace_call (not in ganache)", "trace_call", [{ to: contract, data: "0x02" }, ["trace"], "latest"]);
await rec("trace_transaction (not in ganache)", "trace_transaction", [emit1.transactionHash]);
await rec("trace_filter (not in ganache)", "trace_filter", [{ fromBlock: "0x1", toBlock: "latest" }]);
await rec("unknown method", "foo_bar", []);
// Submissions the table knows that ganache does not serve (appended to the corpus on their own, ids 900+).
// The raw transaction of "raw transaction, not RLP" below: Prism emulates the method ganache lacks with
// eth_sendRawTransaction, and the replaying node answers that from its recording.
await rec("sync raw transaction (not served by ganache)", "eth_sendRawTransactionSync", ["0x1234", 2000]);
await rec("user operation (not served by ganache)", "eth_sendUserOperation", [
  { sender: "0x0000000000000000000000000000000000000001", nonce: "0x0", callData: "0x" },
  "0x0000000071727De22E5E9d8BAf0edAc6f37da032",
]);
await rec("unknown eth_ method", "eth_noSuchMethod", [1, 2]);

// Filters (state on the node; ids are the node's).
const logFilter = (await rec("new log filter", "eth_newFilter", [{ fromBlock: "0x0", address: contract }])).result;
await rec("filter logs", "eth_getFilterLogs", [logFilter]);
const blockFilter = (await rec("new block filter", "eth_newBlockFilter", [])).result;
const txFilter = (await rec("new pending transaction filter", "eth_newPendingTransactionFilter", [])).result;
await rec("log filter changes: none yet", "eth_getFilterChanges", [logFilter]);
await rec("uninstall the block filter", "eth_uninstallFilter", [blockFilter]);
await rec("changes of an uninstalled filter", "eth_getFilterChanges", [blockFilter]);
await rec("uninstall an unknown filter", "eth_uninstallFilter", ["0xdead"]);
await rec("pending transaction filter changes", "eth_getFilterChanges", [txFilter]);

// Subscriptions over HTTP: the node's answer (Prism refuses these itself).
await rec("subscribe over HTTP", "eth_subscribe", ["newHeads"]);
await rec("unsubscribe over HTTP", "eth_unsubscribe", ["0x1"]);

// ---- recorded exchanges: signing and writes (last: they change the chain) ---------------------------
await rec("sign", "eth_sign", [a0, "0x68656c6c6f"]);
await rec("sign with an unknown account", "eth_sign", ["0x" + "12".repeat(20), "0x68656c6c6f"]);
await rec("sign a transaction", "eth_signTransaction", [
  { from: a1, to: a2, value: "0x1", gas: "0x5208", gasPrice: "0x77359400", nonce: "0x7" },
]);
await rec("submit work", "eth_submitWork", ["0x0000000000000001", "0x" + "00".repeat(32), "0x" + "00".repeat(32)]);
await rec("submit hashrate", "eth_submitHashrate", ["0x" + "00".repeat(31) + "01", "0x" + "00".repeat(32)]);
const stale = await rec("raw transaction, nonce too low", "eth_sendRawTransaction", [rawStale]);
if (!stale.error) throw new Error(`stale nonce accepted: ${JSON.stringify(stale)}`);
await rec("raw transaction, not RLP", "eth_sendRawTransaction", ["0x1234"]);
await rec("conditional raw transaction (not in ganache)", "eth_sendRawTransactionConditional", [rawOk, {}]);
await rec("bundle (not in ganache)", "eth_sendBundle", [{ txs: [rawOk], blockNumber: "0x" + (Number(head) + 1).toString(16) }]);
await rec("private transaction (not in ganache)", "eth_sendPrivateTransaction", [{ tx: rawOk }]);
await rec("send transaction from a locked account", "eth_sendTransaction", [{ from: "0x" + "12".repeat(20), to: a0, value: "0x1" }]);
await rec("send transaction beyond balance", "eth_sendTransaction", [{ from: a3, to: a0, value: "0xffffffffffffffffffffffffffff" }]);
const ok = await rec("raw transaction", "eth_sendRawTransaction", [rawOk]);
if (!ok.result) throw new Error(`raw transaction refused: ${JSON.stringify(ok)}`);
const low = await rec("raw transaction reusing a mined nonce", "eth_sendRawTransaction", [rawLow]);
if (!low.error) throw new Error(`reused nonce accepted: ${JSON.stringify(low)}`);
await rec("send transaction", "eth_sendTransaction", [{ from: a0, to: a1, value: "0x3" }]);

fs.writeFileSync(out, lines.join("\n") + "\n");
console.log(`wrote ${lines.length} exchanges to ${out}; contract ${contract}, head before writes ${head}`);
await server.close();
