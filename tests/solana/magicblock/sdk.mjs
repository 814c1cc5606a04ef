// MagicBlock's own SDKs, unchanged, through a magic router (run by tests/solana_sdk.rs).
//
// usage: node sdk.mjs SETUP_JSON
//
// SETUP_JSON names the router URL, the payer's secret key, the accounts (alice delegated to ER 1, carol to
// ER 2, bob undelegated, dave undelegated until the test delegates it), a program id and the two ERs
// ({identity, url}). Each step drives one SDK function the way an application does and prints one JSON line:
//   {"step": NAME, "ok": true|false, "error"?: TEXT, "side"?: "base"|"er1"|"er2", "signature"?, "blockhash"?, ...}
// `side` is where the step's transaction or blockhash must come from; the Rust test checks it at the fakes
// (the transaction reached that side exactly once; its blockhash was issued there). A step that needs the
// test to act (delegate an account while the Resolver watches) prints {"need": ...} and waits for a line on
// stdin. A failing step does not stop the others: every step runs, each within STEP_MS.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import {
  Keypair,
  PublicKey,
  SystemProgram,
  Transaction,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from "@solana/web3.js";
import {
  ConnectionMagicRouter,
  GetCommitmentSignature,
  Resolver,
  createCommitInstruction,
} from "@magicblock-labs/ephemeral-rollups-sdk";
import * as erKit from "@magicblock-labs/ephemeral-rollups-kit";
import {
  AccountRole,
  address,
  appendTransactionMessageInstructions,
  createKeyPairFromBytes,
  createTransactionMessage,
  getAddressFromPublicKey,
  pipe,
  setTransactionMessageFeePayer,
} from "@solana/kit";

const STEP_MS = 8000;
const setup = JSON.parse(readFileSync(process.argv[2], "utf8"));
const url = setup.url;
const payer = Keypair.fromSecretKey(Uint8Array.from(setup.payer_secret));
const key = (name) => new PublicKey(setup.accounts[name]);
const program = new PublicKey(setup.program);
const er = { er1: setup.ers.er1, er2: setup.ers.er2 };

const lines = createInterface({ input: process.stdin });
const replies = lines[Symbol.asyncIterator]();

function emit(o) {
  process.stdout.write(JSON.stringify(o) + "\n");
}

/// Asks the test to act, and waits until it says it did.
async function need(what) {
  emit({ need: what });
  const { value, done } = await replies.next();
  if (done || value.trim() !== "ok") throw new Error(`the test did not do ${JSON.stringify(what)}: ${value}`);
}

function check(cond, message) {
  if (!cond) throw new Error(message);
}

/// Runs one step: its function returns the step's details; a throw or STEP_MS without an answer fails it.
async function step(name, f) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${STEP_MS} ms`)), STEP_MS);
  });
  try {
    const details = await Promise.race([f(), timeout]);
    emit({ step: name, ok: true, ...(details ?? {}) });
  } catch (e) {
    emit({ step: name, ok: false, error: `${e?.name}: ${e?.message}` });
  } finally {
    clearTimeout(timer);
  }
}

/// An instruction of the test program writing `account` (what an app's own instruction does).
const write = (account, note) =>
  new TransactionInstruction({
    programId: program,
    keys: [{ pubkey: account, isSigner: false, isWritable: true }],
    data: Buffer.from(note),
  });

const legacy = (...ixs) => {
  const tx = new Transaction().add(...ixs);
  tx.feePayer = payer.publicKey;
  return tx;
};

const text = (s) => new TextEncoder().encode(s);

async function web3Steps() {
  const conn = new ConnectionMagicRouter(url, { commitment: "confirmed" });
  const alice = key("alice");
  const bob = key("bob");
  const carol = key("carol");
  const dave = key("dave");
  let erBlockhash;

  await step("web3.getClosestValidator", async () => {
    const v = await conn.getClosestValidator();
    check(v.identity === er.er1.identity, `identity ${v.identity}, expected the default ER ${er.er1.identity}`);
    new PublicKey(v.identity);
    return { identity: v.identity, fqdn: v.fqdn };
  });
  await step("web3.getDelegationStatus.delegated", async () => {
    const v = await conn.getDelegationStatus(alice);
    check(v?.isDelegated === true, `alice: ${JSON.stringify(v)}`);
    return { status: v };
  });
  await step("web3.getDelegationStatus.undelegated", async () => {
    const v = await conn.getDelegationStatus(bob.toBase58());
    check(v?.isDelegated === false, `bob: ${JSON.stringify(v)}`);
    return { status: v };
  });
  await step("web3.getLatestBlockhashForTransaction.er", async () => {
    const v = await conn.getLatestBlockhashForTransaction(legacy(write(alice, "bh")));
    check(typeof v?.blockhash === "string", `answer ${JSON.stringify(v)}`);
    check(Number.isSafeInteger(v.lastValidBlockHeight), `lastValidBlockHeight in ${JSON.stringify(v)}`);
    erBlockhash = v.blockhash;
    return { side: "er1", blockhash: v.blockhash, lastValidBlockHeight: v.lastValidBlockHeight };
  });
  await step("web3.getLatestBlockhashForTransaction.base", async () => {
    const v = await conn.getLatestBlockhashForTransaction(legacy(write(bob, "bh")));
    check(typeof v?.blockhash === "string", `answer ${JSON.stringify(v)}`);
    check(Number.isSafeInteger(v.lastValidBlockHeight), `lastValidBlockHeight in ${JSON.stringify(v)}`);
    return { side: "base", blockhash: v.blockhash, lastValidBlockHeight: v.lastValidBlockHeight };
  });
  await step("web3.prepareTransaction", async () => {
    const tx = await conn.prepareTransaction(legacy(write(alice, "prepare")));
    check(typeof tx.recentBlockhash === "string", `recentBlockhash ${tx.recentBlockhash}`);
    return { side: "er1", blockhash: tx.recentBlockhash };
  });
  await step("web3.isBlockhashValid", async () => {
    check(erBlockhash, "no ER blockhash from the earlier step");
    const v = await conn.isBlockhashValid(erBlockhash, { commitment: "confirmed" });
    check(v.value === true, `an ER blockhash said ${JSON.stringify(v)}`);
    return { side: "er1", blockhash: erBlockhash };
  });

  const sent = async (tx, side) => {
    const signature = await conn.sendTransaction(tx, [payer], { skipPreflight: false });
    return { side, signature, blockhash: tx.recentBlockhash };
  };
  await step("web3.sendTransaction.legacy.er", () => sent(legacy(write(alice, "send er")), "er1"));
  await step("web3.sendTransaction.legacy.base", () =>
    sent(legacy(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: bob, lamports: 4242 })), "base"),
  );
  const confirmed = async (tx, side) => {
    const signature = await conn.sendAndConfirmTransaction(tx, [payer], { commitment: "confirmed" });
    return { side, signature, blockhash: tx.recentBlockhash };
  };
  await step("web3.sendAndConfirmTransaction.legacy.er", () => confirmed(legacy(write(alice, "confirm er")), "er1"));
  await step("web3.sendAndConfirmTransaction.legacy.base", () =>
    confirmed(legacy(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: bob, lamports: 4243 })), "base"),
  );
  // v0: the SDK's blockhash call takes the legacy form of the same instructions; web3.js sends and confirms.
  const v0 = async (ix, side) => {
    const { blockhash, lastValidBlockHeight } = await conn.getLatestBlockhashForTransaction(legacy(ix));
    const message = new TransactionMessage({
      payerKey: payer.publicKey,
      recentBlockhash: blockhash,
      instructions: [ix],
    }).compileToV0Message();
    const tx = new VersionedTransaction(message);
    tx.sign([payer]);
    const signature = await conn.sendTransaction(tx, { skipPreflight: false });
    const c = await conn.confirmTransaction({ signature, blockhash, lastValidBlockHeight }, "confirmed");
    check(!c.value.err, `status ${JSON.stringify(c.value)}`);
    return { side, signature, blockhash };
  };
  await step("web3.sendTransaction.v0.er", () => v0(write(alice, "v0 er"), "er1"));
  await step("web3.sendTransaction.v0.base", () => v0(write(bob, "v0 base"), "base"));
  await step("web3.GetCommitmentSignature", async () => {
    const tx = legacy(write(alice, "commit"), createCommitInstruction(payer.publicKey, [alice]));
    const signature = await conn.sendAndConfirmTransaction(tx, [payer], { commitment: "confirmed" });
    const commit = await GetCommitmentSignature(signature, conn);
    return { side: "er1", signature, blockhash: tx.recentBlockhash, commit };
  });

  // The Resolver reads delegation records from `chain` and follows them over `websocket` (both the router).
  const resolver = new Resolver(
    { chain: url, websocket: url },
    new Map([
      [er.er1.identity, er.er1.url],
      [er.er2.identity, er.er2.url],
    ]),
  );
  const routeOf = (conn) =>
    conn === resolver.chain ? "base" : conn === undefined ? "none" : conn.rpcEndpoint.replace(/\/$/, "");
  const erUrl = (name) => er[name].url.replace(/\/$/, "");
  await step("web3.Resolver.trackAccount", async () => {
    const a = await resolver.trackAccount(alice);
    check(a.status === 0 && a.validator.toBase58() === er.er1.identity, `alice: ${JSON.stringify(a)}`);
    const b = await resolver.trackAccount(bob);
    check(b.status === 1, `bob: ${JSON.stringify(b)}`);
    return {};
  });
  // Polls resolve(account) until it gives `want` (a route's URL or "base"), within 5 s.
  const follows = async (account, want) => {
    const until = Date.now() + 5000;
    let got;
    while (Date.now() < until) {
      got = routeOf(await resolver.resolve(account));
      if (got === want) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`resolve gives ${got}, expected ${want}`);
  };
  // trackAccount returns once it read the record; its subscription may still be on its way (web3.js
  // subscribes in the background). A router answers a subscription once its upstream confirmed it, so a
  // change made after web3.js calls it "subscribed" must reach the Resolver.
  const subscribed = async () => {
    const until = Date.now() + 5000;
    for (;;) {
      const subs = Object.values(resolver.ws._subscriptionsByHash ?? {});
      if (subs.length > 0 && subs.every((s) => s.state === "subscribed")) return;
      check(Date.now() < until, `record subscriptions not live: ${JSON.stringify(subs.map((s) => s.state))}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  await step("web3.Resolver.followsDelegation", async () => {
    const d = await resolver.trackAccount(dave);
    check(d.status === 1, `dave before: ${JSON.stringify(d)}`);
    await subscribed();
    await need({ delegate: dave.toBase58(), to: "er2" });
    await follows(dave, erUrl("er2"));
    return {};
  });
  await step("web3.Resolver.followsUndelegation", async () => {
    await need({ undelegate: dave.toBase58() });
    await follows(dave, "base");
    return {};
  });
  await step("web3.Resolver.resolveForTransaction", async () => {
    const one = routeOf(await resolver.resolveForTransaction(legacy(write(alice, "r"))));
    check(one === erUrl("er1"), `a write of alice resolves to ${one}`);
    const none = routeOf(await resolver.resolveForTransaction(legacy(write(bob, "r"))));
    check(none === "base", `a write of bob resolves to ${none}`);
    const two = routeOf(await resolver.resolveForTransaction(legacy(write(alice, "r"), write(carol, "r"))));
    check(two === "none", `writes on two ERs resolve to ${two}`);
    return {};
  });
  await resolver.terminate().catch(() => {});
}

async function kitSteps() {
  const pair = await createKeyPairFromBytes(Uint8Array.from(setup.payer_secret));
  const payerAddress = await getAddressFromPublicKey(pair.publicKey);
  const kitWrite = (account, note) => ({
    programAddress: address(program.toBase58()),
    accounts: [{ address: address(account), role: AccountRole.WRITABLE }],
    data: text(note),
  });
  const message = (...ixs) =>
    pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayer(payerAddress, m),
      (m) => appendTransactionMessageInstructions(ixs, m),
    );
  const alice = setup.accounts.alice;
  const bob = setup.accounts.bob;
  let conn;
  let sentSignature;

  await step("kit.isRouter", async () => {
    check((await erKit.isRouter(url)) === true, "isRouter said false");
    return {};
  });
  await step("kit.Connection.create", async () => {
    conn = await erKit.Connection.create(url);
    check(conn.isMagicRouter === true, "Connection.create took the router for a plain RPC");
    return {};
  });
  await step("kit.getLatestBlockhashForTransaction", async () => {
    check(conn, "no connection");
    const v = await conn.getLatestBlockhashForTransaction(message(kitWrite(alice, "bh")));
    return { side: "er1", blockhash: v.blockhash, lastValidBlockHeight: Number(v.lastValidBlockHeight) };
  });
  await step("kit.sendTransaction", async () => {
    check(conn, "no connection");
    sentSignature = await conn.sendTransaction(message(kitWrite(alice, "kit send")), [pair]);
    return { side: "er1", signature: sentSignature };
  });
  await step("kit.confirmTransaction", async () => {
    check(sentSignature, "nothing was sent");
    await conn.confirmTransaction(sentSignature, { commitment: "confirmed" });
    return { side: "er1", signature: sentSignature };
  });
  await step("kit.sendAndConfirmTransaction.er", async () => {
    check(conn, "no connection");
    const signature = await conn.sendAndConfirmTransaction(message(kitWrite(alice, "kit confirm")), [pair], {
      commitment: "confirmed",
    });
    return { side: "er1", signature };
  });
  await step("kit.sendAndConfirmTransaction.base", async () => {
    check(conn, "no connection");
    const signature = await conn.sendAndConfirmTransaction(message(kitWrite(bob, "kit confirm base")), [pair], {
      commitment: "confirmed",
    });
    return { side: "base", signature };
  });
  await step("kit.getCommitmentSignature", async () => {
    check(conn, "no connection");
    const signature = await conn.sendAndConfirmTransaction(
      message(kitWrite(alice, "kit commit"), erKit.createCommitInstruction(payerAddress, [address(alice)])),
      [pair],
      { commitment: "confirmed" },
    );
    const commit = await conn.getCommitmentSignature(signature);
    return { side: "er1", signature, commit };
  });
  await step("kit.getBalance", async () => {
    check(conn, "no connection");
    const delegated = await conn.getBalance(address(alice));
    const undelegated = await conn.getBalance(address(bob));
    check(delegated === BigInt(setup.lamports.er1), `alice (delegated) has ${delegated}, the ER holds ${setup.lamports.er1}`);
    check(undelegated === BigInt(setup.lamports.base), `bob has ${undelegated}, the base layer holds ${setup.lamports.base}`);
    return {};
  });
}

/// The web3.js SDK against MagicBlock's real ER validator behind the router: the payer and bob are delegated
/// to it on the base layer, so a transfer between them runs on the ER.
async function realErSteps() {
  const conn = new ConnectionMagicRouter(url, { commitment: "confirmed" });
  const bob = key("bob");
  const transfer = (lamports) =>
    legacy(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: bob, lamports }));
  let sent;
  await step("real.getDelegationStatus", async () => {
    const v = await conn.getDelegationStatus(payer.publicKey);
    check(v?.isDelegated === true && v.delegationRecord?.authority === er.er1.identity, JSON.stringify(v));
    return {};
  });
  await step("real.getLatestBlockhashForTransaction", async () => {
    const v = await conn.getLatestBlockhashForTransaction(transfer(1));
    check(typeof v?.blockhash === "string" && Number.isSafeInteger(v.lastValidBlockHeight), JSON.stringify(v));
    return { side: "er1", blockhash: v.blockhash, lastValidBlockHeight: v.lastValidBlockHeight };
  });
  await step("real.sendAndConfirmTransaction", async () => {
    const tx = transfer(4242);
    const signature = await conn.sendAndConfirmTransaction(tx, [payer], { commitment: "confirmed" });
    sent = { signature, blockhash: tx.recentBlockhash };
    return { side: "er1", ...sent };
  });
  await step("real.isBlockhashValid", async () => {
    check(sent, "nothing was sent");
    const v = await conn.isBlockhashValid(sent.blockhash, { commitment: "confirmed" });
    check(v.value === true, JSON.stringify(v));
    return { side: "er1", blockhash: sent.blockhash };
  });
  await step("real.getTransaction", async () => {
    check(sent, "nothing was sent");
    const t = await conn.getTransaction(sent.signature, { maxSupportedTransactionVersion: 0, commitment: "confirmed" });
    check(t?.meta && t.meta.err === null, JSON.stringify(t?.meta));
    const st = await conn.getSignatureStatus(sent.signature);
    check(st.value && st.value.err === null, JSON.stringify(st));
    return { side: "er1", signature: sent.signature };
  });
  await step("real.getAccountInfo", async () => {
    const a = await conn.getAccountInfo(bob, "confirmed");
    check(a?.lamports === setup.lamports.er1 + 4242, `bob has ${a?.lamports}, expected ${setup.lamports.er1 + 4242}`);
    return {};
  });
}

const only = setup.only;
if (!only || only === "web3") await web3Steps();
if (!only || only === "kit") await kitSteps();
if (only === "real") await realErSteps();
emit({ done: true });
process.exit(0);
