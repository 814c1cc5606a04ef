// A real viem client across a reorg the node makes (tests/reorgs.rs), through Prism and straight to the node:
//   node reorg.mjs <prism http url> <prism ws url> <anvil http url> <anvil ws url>
// Watches blocks (watchBlocks) and the Probe contract's Set events (watchContractEvent) over WebSocket on
// both, reads two transactions' receipts and transactions over HTTP on both, then has anvil replace its last
// three blocks (one transaction moved to another block, the other dropped), roll back its head and mine on.
// viem reads again and the watchers see the reorg. Prints one JSON object: what each side showed.
// Exits non-zero (with the reason on stderr) when a step fails.
import fs from "node:fs";
import { createPublicClient, http, webSocket, encodeFunctionData } from "viem";

const [prismHttp, prismWs, nodeHttp, nodeWs] = process.argv.slice(2);
if (!nodeWs) {
  console.error("usage: node reorg.mjs <prism http url> <prism ws url> <anvil http url> <anvil ws url>");
  process.exit(2);
}
const probe = JSON.parse(fs.readFileSync(new URL("./probe.json", import.meta.url), "utf8"));
const chain = (h, w) => ({
  id: 4663,
  name: "prism-test",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [h], webSocket: [w] } },
});
const httpClient = (h, w) =>
  createPublicClient({ chain: chain(h, w), transport: http(h, { retryCount: 0, timeout: 20_000 }) });
const wsClient = (h, w) =>
  createPublicClient({ chain: chain(h, w), transport: webSocket(w, { retryCount: 0, timeout: 20_000 }) });
const sides = {
  prism: { read: httpClient(prismHttp, prismWs), watch: wsClient(prismHttp, prismWs) },
  node: { read: httpClient(nodeHttp, nodeWs), watch: wsClient(nodeHttp, nodeWs) },
};
const step = (name) => console.error(`[reorg.mjs] ${name}`);
const show = (v) => JSON.parse(JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x)));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// anvil's own methods (the test node's controls) over plain JSON-RPC.
let rpcId = 0;
async function anvil(method, params = []) {
  const r = await fetch(nodeHttp, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method, params }),
  });
  const v = await r.json();
  if (v.error) throw new Error(`${method}: ${JSON.stringify(v.error)}`);
  return v.result;
}
const [deployer, alice, bob] = await anvil("eth_accounts");
const mine = (n = 1) => (async () => { for (let i = 0; i < n; i++) await anvil("evm_mine"); })();
const setData = (v) => encodeFunctionData({ abi: probe.abi, functionName: "set", args: [BigInt(v)] });

step("deploy Probe and watch on both sides");
const deployHash = await anvil("eth_sendTransaction", [{ from: deployer, data: probe.bytecode, gas: "0xf4240" }]);
await mine();
const contract = (await anvil("eth_getTransactionReceipt", [deployHash])).contractAddress;
const seen = { prism: { blocks: [], logs: [] }, node: { blocks: [], logs: [] } };
const unwatch = [];
for (const [name, side] of Object.entries(sides)) {
  unwatch.push(
    side.watch.watchBlocks({
      onBlock: (b, prev) =>
        seen[name].blocks.push({
          number: Number(b.number),
          hash: b.hash,
          parentHash: b.parentHash,
          // What a client checks to notice a reorg: the new block does not build on the one before it.
          buildsOnPrevious: prev ? b.parentHash === prev.hash : null,
        }),
      onError: (e) => seen[name].error = String(e),
    }),
    side.watch.watchContractEvent({
      address: contract,
      abi: probe.abi,
      eventName: "Set",
      onLogs: (logs) =>
        logs.forEach((l) =>
          seen[name].logs.push({
            blockNumber: Number(l.blockNumber),
            blockHash: l.blockHash,
            value: Number(l.args.value),
            removed: l.removed,
          }),
        ),
      onError: (e) => seen[name].error = String(e),
    }),
  );
}
const waitFor = async (what, pred, ms = 30_000) => {
  for (let t = 0; t < ms; t += 20) {
    if (pred()) return true;
    await sleep(20);
  }
  if (what) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(show(seen))}`);
  return false;
};
const onBoth = (hash) => ["prism", "node"].every((s) => seen[s].blocks.some((b) => b.hash === hash));
// The watchers subscribe in the background: a block is mined until both show one (that block is the first
// both streams are compared from).
// The same for the event watchers: each block has a set(0) in it, until both show its log; the logs are
// compared from there.
let first;
for (let i = 0; ; i++) {
  await anvil("eth_sendTransaction", [{ from: deployer, to: contract, data: setData(0), gas: "0x186a0" }]);
  await mine();
  first = await anvil("eth_getBlockByNumber", ["latest", false]);
  const logged = () => ["prism", "node"].every((s) => seen[s].logs.some((l) => l.blockHash === first.hash));
  if (await waitFor(null, () => onBoth(first.hash) && logged(), 1_000)) break;
  if (i === 30) throw new Error(`the watchers never both showed a block: ${JSON.stringify(show(seen))}`);
}
for (const s of ["prism", "node"]) seen[s].logs.length = 0;

step("two transactions, A and B, in the blocks the reorg will replace");
const signed = async (from, value) =>
  anvil("eth_signTransaction", [{
    from, to: contract, data: setData(value), gas: "0x186a0", gasPrice: "0x77359400", chainId: "0x1237",
    nonce: await anvil("eth_getTransactionCount", [from, "pending"]),
  }]);
const rawA = await signed(alice, 1);
const a = await anvil("eth_sendRawTransaction", [rawA]);
await mine();
const b = await anvil("eth_sendRawTransaction", [await signed(bob, 2)]);
await mine(2);
const reads = async (name) => {
  const c = sides[name].read;
  const receipt = async (hash) => {
    try {
      const r = await c.getTransactionReceipt({ hash });
      return { blockNumber: Number(r.blockNumber), blockHash: r.blockHash, status: r.status };
    } catch (e) {
      return { notFound: e.name };
    }
  };
  const tx = async (hash) => {
    try {
      const t = await c.getTransaction({ hash });
      return { blockNumber: t.blockNumber === null ? null : Number(t.blockNumber), blockHash: t.blockHash };
    } catch (e) {
      return { notFound: e.name };
    }
  };
  const head = await c.getBlockNumber({ cacheTime: 0 });
  const blocks = [];
  for (let n = head - 3n; n <= head; n++) {
    const blk = await c.getBlock({ blockNumber: n });
    blocks.push({ number: Number(blk.number), hash: blk.hash, transactions: blk.transactions });
  }
  const logs = await c.getContractEvents({ address: contract, abi: probe.abi, eventName: "Set", fromBlock: 0n, toBlock: head });
  return show({
    receiptA: await receipt(a), receiptB: await receipt(b), txA: await tx(a), txB: await tx(b),
    blocks, logs: logs.map((l) => ({ blockHash: l.blockHash, value: Number(l.args.value) })),
  });
};
const before = { prism: await reads("prism"), node: await reads("node") };
// Twice through Prism: whatever it caches is cached now.
await reads("prism");
const top = await anvil("eth_getBlockByNumber", ["latest", false]);
await waitFor("the blocks before the reorg", () => onBoth(top.hash));

step("anvil replaces its last three blocks: A moves to the new head block, B is dropped");
await anvil("anvil_reorg", [3, [[rawA, 2]]]);
const reorged = await anvil("eth_getBlockByNumber", ["latest", false]);
await waitFor("the reorg on both sides", () => onBoth(reorged.hash));
const after = { prism: await reads("prism"), node: await reads("node") };

step("a rollback of the head block, then new blocks");
await anvil("anvil_rollback", [1]);
await mine(2);
const last = await anvil("eth_getBlockByNumber", ["latest", false]);
await waitFor("the last block on both sides", () => onBoth(last.hash));
// Logs may follow their block: the node's last log through Prism too.
const lastLog = seen.node.logs[seen.node.logs.length - 1];
await waitFor("the node's last log through Prism", () =>
  seen.prism.logs.some((l) => l.blockHash === lastLog.blockHash && l.value === lastLog.value),
);
const end = { prism: await reads("prism"), node: await reads("node") };
unwatch.forEach((u) => u());

console.log(
  JSON.stringify(
    show({
      a, b, contract, before, after, end,
      first: first.hash,
      blocks: { prism: seen.prism.blocks, node: seen.node.blocks },
      logs: { prism: seen.prism.logs, node: seen.node.logs },
      errors: { prism: seen.prism.error ?? null, node: seen.node.error ?? null },
    }),
  ),
);
process.exit(0);
