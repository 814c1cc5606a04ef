// Writes presigned.json: raw signed transfers (chain id 4663) from ganache's deterministic accounts 5 to 9,
// nonce 0, so Rust tests can submit real eth_sendRawTransaction payloads without a signer, and one from
// account 4 at nonce 7 ("account4_gap": its nonces 0..6 are never sent, so no block ever includes it). Run
// once by hand (`node presign.mjs`); the tests only read the committed file. Each account's nonce 0 may be
// used once per node, so each test binary gives each transaction to one test.
import fs from "node:fs";
import { mnemonicToAccount } from "viem/accounts";
import { keccak256 } from "viem";

const MNEMONIC = "myth like bonus scare over problem client lizard pioneer submit female collect";
const out = {};
for (const [index, nonce, name] of [
  [8, 0, "account8"],
  [9, 0, "account9"],
  [5, 0, "account5"],
  [6, 0, "account6"],
  [7, 0, "account7"],
  [4, 7, "account4_gap"],
]) {
  const account = mnemonicToAccount(MNEMONIC, { addressIndex: index });
  const raw = await account.signTransaction({
    chainId: 4663,
    type: "legacy",
    nonce,
    gas: 21000n,
    gasPrice: 20_000_000_000n,
    to: mnemonicToAccount(MNEMONIC, { addressIndex: 0 }).address,
    value: 1000n + BigInt(index),
  });
  out[name] = { from: account.address.toLowerCase(), nonce, raw, hash: keccak256(raw) };
}
fs.writeFileSync(new URL("./presigned.json", import.meta.url), JSON.stringify(out, null, 2) + "\n");
console.log(JSON.stringify(out, null, 2));
