// Builds contracts/Probe.sol into probe.json (ABI + creation bytecode) with solc-js. Run once by hand
// (`node build.mjs`) when the contract changes; the tests only read the committed probe.json.
import fs from "node:fs";
import solc from "solc";

const source = fs.readFileSync(new URL("./contracts/Probe.sol", import.meta.url), "utf8");
const input = {
  language: "Solidity",
  sources: { "Probe.sol": { content: source } },
  settings: {
    // ganache 7 implements up to Shanghai; paris avoids PUSH0 so any dev node runs it.
    evmVersion: "paris",
    optimizer: { enabled: true, runs: 200 },
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
for (const e of out.errors ?? []) {
  console.error(e.formattedMessage);
  if (e.severity === "error") process.exit(1);
}
const c = out.contracts["Probe.sol"].Probe;
const artifact = {
  contractName: "Probe",
  compiler: `solc ${solc.version()}`,
  evmVersion: input.settings.evmVersion,
  abi: c.abi,
  bytecode: "0x" + c.evm.bytecode.object,
};
fs.writeFileSync(new URL("./probe.json", import.meta.url), JSON.stringify(artifact, null, 2) + "\n");
console.log(`probe.json: ${c.evm.bytecode.object.length / 2} bytes of creation code`);
