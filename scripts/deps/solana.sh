#!/usr/bin/env bash
# Solana clients for tests/solana_client.rs and the fixture generator (tests/fixtures/solana/make_fixtures.py):
# solana-py + solders from PyPI, web3.js v1 (pinned by tests/solana/web3/package-lock.json) from npm, and
# MagicBlock's own SDKs with their clients for tests/solana_sdk.rs (pinned by
# tests/solana/magicblock/package-lock.json).
# Idempotent, quiet when already installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# Pinned: the versions the tests were written against.
if ! python3 -c 'import solana, solders' >/dev/null 2>&1; then
  python3 -m pip install -q solana==0.41.0 solders==0.29.0 2>/dev/null \
    || python3 -m pip install -q --break-system-packages solana==0.41.0 solders==0.29.0
  python3 -c 'import solana, solders' >/dev/null
fi
if [ ! -d tests/solana/web3/node_modules/@solana/web3.js ]; then
  (cd tests/solana/web3 && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
if [ ! -d tests/solana/magicblock/node_modules/@magicblock-labs/ephemeral-rollups-kit ]; then
  (cd tests/solana/magicblock && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
