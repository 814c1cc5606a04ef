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
# MagicBlock's ER validator (the npm package above, for tests/solana_real_er.rs) is built against glibc 2.39
# and GCC 13's libstdc++; Debian 12 has glibc 2.36. Debian 13's libc6, libstdc++6 and libgcc-s1 are
# downloaded (apt's own client, a private source list and cache: nothing is installed) and unpacked beside
# it; tests/support/real_er.rs starts the validator through their loader, with nofile.so preloaded (see
# tests/solana/magicblock/nofile.c: the validator insists on 1 000 000 open files).
ER_RT=tests/solana/magicblock/er-runtime
if [ -d tests/solana/magicblock/node_modules/@magicblock-labs/ephemeral-validator-linux-x64 ] \
  && { [ ! -x "$ER_RT/lib/ld-linux-x86-64.so.2" ] || [ ! -f "$ER_RT/nofile.so" ]; }; then
  tmp=$(mktemp -d)
  mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs" "$tmp/root"
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    > "$tmp/parts/trixie.sources"
  apt_opts=(-qq -o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$tmp/parts"
    -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update >/dev/null
  # Pinned: the versions the test was written against; the archive's current ones if those are gone.
  (cd "$tmp/debs" && { apt-get "${apt_opts[@]}" download libc6=2.41-12+deb13u5 libstdc++6=14.2.0-19 \
      libgcc-s1=14.2.0-19 2>/dev/null || apt-get "${apt_opts[@]}" download libc6 libstdc++6 libgcc-s1; })
  for deb in "$tmp"/debs/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
  rm -rf "$ER_RT" && mkdir -p "$ER_RT"
  cp -a "$tmp/root/usr/lib/x86_64-linux-gnu" "$ER_RT/lib"
  cc -shared -fPIC -O2 -o "$ER_RT/nofile.so" tests/solana/magicblock/nofile.c -ldl
  rm -rf "$tmp"
  test -x "$ER_RT/lib/ld-linux-x86-64.so.2"
fi
