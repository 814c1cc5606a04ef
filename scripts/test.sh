#!/usr/bin/env bash
# The test command: installs what the tests need, then runs formatting, lints and every test.
# Works on a fresh Debian machine with the Rust toolchain; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the integration tests use: a real Redis for the cluster tests (their Sentinel runs as
# `redis-server --sentinel`, so the redis-sentinel package is not needed), headless Chromium for the
# status page, openssl for test certificates, Python's Prometheus text parser for the metrics test, and
# libseccomp (the library container runtimes use) for tests/seccomp.rs.
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
python3 -c 'import prometheus_client' >/dev/null 2>&1 || need+=(python3-prometheus-client)
python3 -c 'import ctypes.util, sys; sys.exit(0 if ctypes.util.find_library("seccomp") else 1)' >/dev/null 2>&1 \
  || need+=(libseccomp2)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The Debian Python package lands in the system interpreter; make sure the one on PATH sees it too.
if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
  python3 -m pip install -q prometheus_client 2>/dev/null || pip3 install -q prometheus_client
fi

# Per-area installers (a real EVM node and its clients, Solana client libraries, ...): each script in
# scripts/deps/ installs what its tests need and is safe to run again.
for dep in scripts/deps/*.sh; do
  [ -e "$dep" ] || continue
  echo "== $dep"
  bash "$dep"
done

# io_uring registers buffers: glommio needs RLIMIT_MEMLOCK >= 512 KiB.
if [ "$(ulimit -l)" != "unlimited" ] && [ "$(ulimit -l)" -lt 8192 ]; then
  ulimit -l 8192 2>/dev/null || echo "warning: ulimit -l is $(ulimit -l) KiB; glommio may refuse to start" >&2
fi

# One build, nothing kept for a second: incremental state would add gigabytes CI never reads back.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# A clean build of every test binary takes about 2 GB (Cargo.toml's dev profile keeps line tables only).
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${free_kb:-0}" -lt 3000000 ]; then
  echo "warning: $((free_kb / 1024)) MiB free here; building the tests needs about 2 GiB" >&2
fi

echo "== layers (scripts/layers.py: no wrong-way import, no new import cycle)"
python3 scripts/layers.py
echo "== targets (scripts/targets.py: file, struct and function sizes only shrink)"
python3 scripts/targets.py
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
# Each integration test starts real Prism processes (and Redis, Chromium); keep parallelism sane for 2 cores.
cargo test --workspace --locked --no-fail-fast -- --test-threads="${PRISM_TEST_THREADS:-4}"
