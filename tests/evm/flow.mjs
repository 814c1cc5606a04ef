// A real viem client's ordinary flow against one JSON-RPC endpoint (Prism in the tests):
//   node flow.mjs <http url> [ws url] [account index]
// Reads the chain id, a block and a balance; deploys Probe (probe.json), writes to it and waits for the
// receipt; sends a value transfer; calls the two reverting functions and records the error exactly as viem
// received it; subscribes to newHeads over WebSocket and collects three heads. Prints one JSON object on
// stdout; exits non-zero (with the reason on stderr) when a step fails.
import fs from "node:fs";
import {
  createPublicClient,
  createWalletClient,
  http,
  webSocket,
  encodeFunctionData,
  decodeErrorResult,
  BaseError,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";

// ganache --wallet.deterministic keys (mnemonic "myth like bonus scare over problem client lizard ...").
export const DEV_KEYS = [
  "0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d",
  "0x6cbed15c793ce57650b9877cf6fa156fbef513c4e6134f022a85b1ffdd59b2a1",
  "0x6370fd033278c143179d81c5526140625662b8daa446c22ee2d73db3707e620c",
  "0x646f1ce2fdad0e6deeeb5c7e8e5543bdde65e86029e2fd9fc169899c440a7913",
];

const [httpUrl, wsArg, accountArg] = process.argv.slice(2);
if (!httpUrl) {
  console.error("usage: node flow.mjs <http url> [ws url] [account index]");
  process.exit(2);
}
const wsUrl = wsArg || httpUrl.replace(/^http/, "ws");
const account = privateKeyToAccount(DEV_KEYS[Number(accountArg ?? 1)]);
const probe = JSON.parse(fs.readFileSync(new URL("./probe.json", import.meta.url), "utf8"));
const chain = {
  id: 4663,
  name: "prism-test",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [httpUrl], webSocket: [wsUrl] } },
};
const transport = http(httpUrl, { retryCount: 0, timeout: 20_000 });
const pc = createPublicClient({ chain, transport, pollingInterval: 200 });
const wallet = createWalletClient({ chain, transport, account });
const out = { client: "viem", account: account.address, txHashes: [] };
const step = (name) => console.error(`[flow.mjs] ${name}`);

// The innermost error that carries a JSON-RPC code (viem wraps it in layers of explanation).
function rpcError(err) {
  let found = null;
  if (err instanceof BaseError) {
    err.walk((e) => {
      if (typeof e.code === "number" && found === null) found = e;
      return false;
    });
  }
  return found;
}

step("chain id, block, balance");
out.chainId = await pc.getChainId();
const block = await pc.getBlock({ blockTag: "latest" });
out.block = { number: Number(block.number), hash: block.hash };
out.balanceWei = (await pc.getBalance({ address: account.address })).toString();

step("deploy Probe");
const deployHash = await wallet.deployContract({ abi: probe.abi, bytecode: probe.bytecode });
out.txHashes.push(deployHash);
const deployReceipt = await pc.waitForTransactionReceipt({ hash: deployHash, timeout: 30_000 });
out.contract = deployReceipt.contractAddress;
out.deployStatus = deployReceipt.status;

step("write set(7) and read it back");
const setHash = await wallet.writeContract({ address: out.contract, abi: probe.abi, functionName: "set", args: [7n] });
out.txHashes.push(setHash);
const setReceipt = await pc.waitForTransactionReceipt({ hash: setHash, timeout: 30_000 });
out.setStatus = setReceipt.status;
out.value = Number(await pc.readContract({ address: out.contract, abi: probe.abi, functionName: "value" }));
const logs = await pc.getContractEvents({
  address: out.contract,
  abi: probe.abi,
  eventName: "Set",
  fromBlock: setReceipt.blockNumber,
  toBlock: setReceipt.blockNumber,
});
out.setLogs = logs.map((l) => ({ who: l.args.who, value: Number(l.args.value) }));

step("value transfer");
const sendHash = await wallet.sendTransaction({ to: privateKeyToAccount(DEV_KEYS[0]).address, value: 12345n });
out.txHashes.push(sendHash);
out.transferStatus = (await pc.waitForTransactionReceipt({ hash: sendHash, timeout: 30_000 })).status;

step("reverting calls");
out.reverts = {};
for (const fn of ["fail", "failCustom"]) {
  const data = encodeFunctionData({ abi: probe.abi, functionName: fn });
  try {
    await pc.call({ account: account.address, to: out.contract, data });
    out.reverts[fn] = { reverted: false };
  } catch (err) {
    const e = rpcError(err);
    const rec = { reverted: true, code: e?.code ?? null, message: e?.details ?? e?.shortMessage ?? null };
    const raw = err.walk((x) => typeof x.data === "string" && x.data.startsWith("0x"))?.data;
    rec.data = raw ?? null;
    if (raw && raw.length > 10) {
      try {
        const d = decodeErrorResult({ abi: probe.abi, data: raw });
        rec.decoded = { name: d.errorName, args: (d.args ?? []).map((a) => (typeof a === "bigint" ? Number(a) : a)) };
      } catch {
        // Error(string) is not in the ABI.
        const d = decodeErrorResult({ data: raw });
        rec.decoded = { name: d.errorName, args: d.args };
      }
    }
    out.reverts[fn] = rec;
  }
}

step("newHeads over WebSocket");
const ws = createPublicClient({ chain, transport: webSocket(wsUrl, { retryCount: 0, timeout: 20_000 }) });
out.heads = await new Promise((resolve, reject) => {
  const heads = [];
  const timer = setTimeout(() => reject(new Error(`only ${heads.length} heads in 20 s: ${heads}`)), 20_000);
  let unwatch = () => {};
  unwatch = ws.watchBlocks({
    onBlock: (b) => {
      heads.push(Number(b.number));
      if (heads.length === 3) {
        clearTimeout(timer);
        unwatch();
        resolve(heads);
      }
    },
    onError: (e) => {
      clearTimeout(timer);
      reject(e);
    },
  });
});
await (await ws.transport.getRpcClient?.())?.close?.();

console.log(JSON.stringify(out));
process.exit(0);
