#!/usr/bin/env bash
# Installs what tests/real_clients.rs, tests/chaos.rs and tests/reorgs.rs need: two real EVM dev nodes (ganache,
# and Foundry's anvil, a binary from npm) and viem from tests/evm/package-lock.json, and web3.py. Idempotent
# and quiet when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/../.."

evm=tests/evm
# npm ci only when node_modules is missing or older than the lock file.
if [ ! -f "$evm/node_modules/.package-lock.json" ] || [ "$evm/package-lock.json" -nt "$evm/node_modules/.package-lock.json" ] \
  || [ ! -f "$evm/node_modules/ganache/dist/node/cli.js" ] \
  || [ ! -x "$evm/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil" ]; then
  echo "== npm ci in $evm (ganache, anvil, viem, solc)"
  (cd "$evm" && npm ci --no-audit --no-fund --loglevel=error)
fi

# web3.py 8 (the 7.x line pins websockets < 16, which other Python test tools on this machine need).
if ! python3 -c 'import web3, sys; sys.exit(0 if int(web3.__version__.split(".")[0]) >= 8 else 1)' >/dev/null 2>&1; then
  echo "== pip install web3"
  python3 -m pip install -q --disable-pip-version-check 'web3>=8,<9' 'websockets>=16' 2>/dev/null \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages 'web3>=8,<9' 'websockets>=16'
  python3 -c 'import web3' >/dev/null
fi
