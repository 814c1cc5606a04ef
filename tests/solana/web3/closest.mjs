// What an app built on MagicBlock's ephemeral-rollups SDK asks the router before delegating: the SDK's
// getClosestValidator() POSTs getIdentity to the router and delegates to `result.identity`. Replayed here as
// the SDK sends it (fetch against the connection's endpoint), then through web3.js' own RPC client.
//
// usage: node closest.mjs URL        prints {"sdk": {identity, fqdn}, "web3": {identity, fqdn}}
import { Connection, PublicKey } from "@solana/web3.js";

const [url] = process.argv.slice(2);
const connection = new Connection(url, "confirmed");

const response = await fetch(connection.rpcEndpoint, {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "getIdentity", params: [] }),
});
const sdk = (await response.json())?.result;
if (!sdk || sdk.identity === undefined) {
  process.stdout.write(JSON.stringify({ error: "no identity in the router's getIdentity answer" }) + "\n");
  process.exit(1);
}
// The SDK turns it into a PublicKey: it must be a valid base58 key.
new PublicKey(sdk.identity);
const web3 = (await connection._rpcRequest("getIdentity", [])).result;
process.stdout.write(JSON.stringify({ sdk, web3 }) + "\n");
