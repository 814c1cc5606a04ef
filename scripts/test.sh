#!/usr/bin/env bash
# The test command: installs what the tests need, then runs formatting, lints and every test.
# Works on a fresh Debian machine with the Rust toolchain; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# Tests need nothing beyond the toolchain yet; later suites add their packages here
# (redis-server, nginx for perf, chromium for the status page, node for real clients).
for pkg in "$@"; do need_apt+=("$pkg"); done
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi

# io_uring registers buffers: glommio needs RLIMIT_MEMLOCK >= 512 KiB.
if [ "$(ulimit -l)" != "unlimited" ] && [ "$(ulimit -l)" -lt 8192 ]; then
  ulimit -l 8192 2>/dev/null || echo "warning: ulimit -l is $(ulimit -l) KiB; glommio may refuse to start" >&2
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
# Each integration test starts real Prism processes; keep parallelism sane for 2 cores.
cargo test --locked -- --test-threads="${PRISM_TEST_THREADS:-4}"
