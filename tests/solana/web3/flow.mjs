// A real web3.js v1 client flow against Prism's magic router (run by tests/solana_client.rs).
//
// usage: node flow.mjs URL FIXTURES_JSON MODE        (MODE: "er" or "base")
//
// new Connection(URL) derives its WebSocket endpoint as URL's port + 1, as web3.js always does. MODE "er": the
// blockhash comes from getBlockhashForAccounts([alice]) (MagicBlock's compat method), the transaction writes
// alice; "base": getLatestBlockhash and a transfer payer -> bob. sendRawTransaction, then
// confirmTransaction({signature, blockhash, lastValidBlockHeight}): web3.js subscribes to the signature over
// the WebSocket and polls getBlockHeight until the notification arrives or the height passes
// lastValidBlockHeight. Prints one JSON line {"signature", ...} on stdout when the flow is past sending
// (so the test can land the transaction), then {"confirmed": true, ...}; exits 1 with {"error"} on failure.
import { readFileSync } from "node:fs";
import {
  Connection,
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  TransactionInstruction,
} from "@solana/web3.js";

const [url, fixturesPath, mode] = process.argv.slice(2);
const fx = JSON.parse(readFileSync(fixturesPath, "utf8"));
const payer = Keypair.fromSecretKey(Uint8Array.from(fx.accounts.payer.secret));
const alice = new PublicKey(fx.accounts.alice.pubkey);
const bob = new PublicKey(fx.accounts.bob.pubkey);
const program = new PublicKey(fx.accounts.program.pubkey);

function emit(o) {
  process.stdout.write(JSON.stringify(o) + "\n");
}

async function main() {
  const conn = new Connection(url, { commitment: "confirmed" });
  let blockhash, lastValidBlockHeight, ix;
  if (mode === "er") {
    const r = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "getBlockhashForAccounts", params: [[alice.toBase58()]] }),
    }).then((x) => x.json());
    if (!r.result) throw new Error("getBlockhashForAccounts: " + JSON.stringify(r));
    // MagicBlock's router answers the bare {blockhash, lastValidBlockHeight}.
    ({ blockhash, lastValidBlockHeight } = r.result);
    ix = new TransactionInstruction({
      programId: program,
      keys: [{ pubkey: alice, isSigner: false, isWritable: true }],
      data: Buffer.from("web3 flow"),
    });
  } else {
    ({ blockhash, lastValidBlockHeight } = await conn.getLatestBlockhash("confirmed"));
    ix = SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: bob, lamports: 4242 });
  }
  const tx = new Transaction({ feePayer: payer.publicKey, blockhash, lastValidBlockHeight }).add(ix);
  tx.sign(payer);
  const signature = await conn.sendRawTransaction(tx.serialize(), { preflightCommitment: "confirmed" });
  emit({ mode, signature, blockhash, lastValidBlockHeight });
  const res = await conn.confirmTransaction({ signature, blockhash, lastValidBlockHeight }, "confirmed");
  if (res.value.err) throw new Error("transaction failed: " + JSON.stringify(res.value.err));
  emit({ mode, confirmed: true, slot: res.context.slot });
}

main().then(
  () => process.exit(0),
  (e) => {
    emit({ mode, error: `${e.name}: ${e.message}` });
    process.exit(1);
  },
);
