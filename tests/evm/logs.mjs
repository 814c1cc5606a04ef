// viem's getLogs over a wide range through Prism, against the node's own answer (tests/real_clients.rs):
//   node logs.mjs <prism url> <node url> <unlocked account address>
// Deploys Probe on the node directly and emits six Set events over three blocks, then asks Prism and the
// node for the same logs (this contract's Set events, and every log) from block 0 to the node's head.
// Prints one JSON object on stdout; exits non-zero (with the reason on stderr) when a step fails.
import fs from "node:fs";
import { createPublicClient, createWalletClient, http } from "viem";

const [prismUrl, nodeUrl, from] = process.argv.slice(2);
if (!prismUrl || !nodeUrl || !from) {
  console.error("usage: node logs.mjs <prism url> <node url> <unlocked account address>");
  process.exit(2);
}
const probe = JSON.parse(fs.readFileSync(new URL("./probe.json", import.meta.url), "utf8"));
const chain = {
  id: 4663,
  name: "prism-test",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [nodeUrl] } },
};
const client = (url) => createPublicClient({ chain, transport: http(url, { retryCount: 0, timeout: 20_000 }) });
const node = client(nodeUrl);
const prism = client(prismUrl);
// The node signs (ganache's accounts are unlocked): the writes are only the setup. It would fill in a
// 90 000 gas limit, too little to deploy, so the gas is given.
const wallet = createWalletClient({ chain, transport: http(nodeUrl, { retryCount: 0 }), account: from });
const step = (name) => console.error(`[logs.mjs] ${name}`);

step("deploy Probe");
const deploy = await wallet.deployContract({ abi: probe.abi, bytecode: probe.bytecode, gas: 1_000_000n });
const deployed = await node.waitForTransactionReceipt({ hash: deploy, timeout: 30_000 });
if (deployed.status !== "success") throw new Error(`deploy: ${deployed.status}`);
const address = deployed.contractAddress;

step("six Set events over three blocks");
for (let round = 0; round < 3; round++) {
  const hashes = [];
  for (let k = 0; k < 2; k++) {
    const v = BigInt(round * 10 + k);
    hashes.push(await wallet.writeContract({ address, abi: probe.abi, functionName: "set", args: [v], gas: 100_000n }));
  }
  for (const hash of hashes) {
    const r = await node.waitForTransactionReceipt({ hash, timeout: 30_000 });
    if (r.status !== "success" || r.logs.length !== 1) throw new Error(`set: ${r.status}, ${r.logs.length} logs`);
  }
}
const head = await node.getBlockNumber();

step(`getLogs 0..${head} through Prism and on the node`);
const event = probe.abi.find((x) => x.type === "event" && x.name === "Set");
const show = (logs) => JSON.stringify(logs, (_, v) => (typeof v === "bigint" ? v.toString() : v));
const mine = { address, event, fromBlock: 0n, toBlock: head };
const [viaPrism, direct] = [await prism.getLogs(mine), await node.getLogs(mine)];
const all = { fromBlock: 0n, toBlock: head };
const [allPrism, allDirect] = [await prism.getLogs(all), await node.getLogs(all)];

console.log(
  JSON.stringify({
    contract: address,
    head: Number(head),
    count: viaPrism.length,
    same: show(viaPrism) === show(direct),
    values: viaPrism.map((l) => Number(l.args.value)),
    countAll: allPrism.length,
    sameAll: show(allPrism) === show(allDirect),
  }),
);
process.exit(0);
