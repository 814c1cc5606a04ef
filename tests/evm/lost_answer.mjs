// One raw transaction from a real viem client whose answer may be lost on the way back:
//   node lost_answer.mjs <http url> [account index]
// Signs a transfer locally (ganache --wallet.deterministic key, chain id 4663, legacy, the account's pending
// nonce read through the endpoint), sends it with sendRawTransaction (the transport never retries:
// retryCount 0), then waits for its receipt. Prints one JSON object on stdout:
//   {account, nonce, hash, sent, status, blockNumber}  (hash: keccak256 of the raw bytes; sent: what viem got)
// or, when sending or waiting fails, the same with `error` ({name, code, message, details, data}); exits
// non-zero then.
import { createPublicClient, createWalletClient, http, keccak256, BaseError } from "viem";
import { privateKeyToAccount } from "viem/accounts";

// ganache --wallet.deterministic keys of accounts 0 and 3 (flow.mjs uses 1 and 2).
const KEYS = {
  0: "0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d",
  3: "0x646f1ce2fdad0e6deeeb5c7e8e5543bdde65e86029e2fd9fc169899c440a7913",
};

const [httpUrl, accountArg] = process.argv.slice(2);
if (!httpUrl || !(Number(accountArg ?? 3) in KEYS)) {
  console.error("usage: node lost_answer.mjs <http url> [account index: 3]");
  process.exit(2);
}
const account = privateKeyToAccount(KEYS[Number(accountArg ?? 3)]);
const chain = {
  id: 4663,
  name: "prism-test",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [httpUrl] } },
};
const transport = http(httpUrl, { retryCount: 0, timeout: 20_000 });
const pc = createPublicClient({ chain, transport, pollingInterval: 200 });
const wallet = createWalletClient({ chain, transport, account });
const out = { client: "viem", account: account.address };
const step = (name) => console.error(`[lost_answer.mjs] ${name}`);

// The innermost error that carries a JSON-RPC code (viem wraps it in layers of explanation).
function describe(err) {
  let coded = null;
  if (err instanceof BaseError) {
    err.walk((e) => {
      if (typeof e.code === "number" && coded === null) coded = e;
      return false;
    });
  }
  const e = coded ?? err;
  return {
    name: err?.name ?? null,
    code: e?.code ?? null,
    message: e?.details ?? e?.shortMessage ?? String(e?.message ?? e),
    details: err?.shortMessage ?? null,
    data: e?.data ?? e?.cause?.data ?? null,
  };
}

try {
  step("nonce");
  out.nonce = await pc.getTransactionCount({ address: account.address, blockTag: "pending" });
  const raw = await account.signTransaction({
    chainId: 4663,
    type: "legacy",
    nonce: out.nonce,
    gas: 21000n,
    gasPrice: 20_000_000_000n,
    to: privateKeyToAccount(KEYS[0]).address,
    value: 4663n,
  });
  out.hash = keccak256(raw);
  step(`sendRawTransaction ${out.hash}`);
  out.sent = await wallet.sendRawTransaction({ serializedTransaction: raw });
  step("waitForTransactionReceipt");
  const receipt = await pc.waitForTransactionReceipt({ hash: out.sent, timeout: 30_000 });
  out.status = receipt.status;
  out.blockNumber = Number(receipt.blockNumber);
} catch (err) {
  out.error = describe(err);
  console.log(JSON.stringify(out));
  console.error(String(err?.stack ?? err));
  process.exit(1);
}
console.log(JSON.stringify(out));
process.exit(0);
