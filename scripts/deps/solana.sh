#!/usr/bin/env bash
# Solana client libraries for tests/solana_client.rs and the fixture generator
# (tests/fixtures/solana/make_fixtures.py): solana-py and solders from PyPI. Idempotent, quiet when present.
set -euo pipefail
if python3 -c 'import solana, solders' >/dev/null 2>&1; then
  exit 0
fi
python3 -m pip install -q solana solders 2>/dev/null \
  || python3 -m pip install -q --break-system-packages solana solders
python3 -c 'import solana, solders' >/dev/null
