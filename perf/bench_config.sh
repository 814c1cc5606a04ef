# Sourced by the perf scripts: the Prism config they all measure (one network, one fast upstream), so every
# script's "prism" is the same proxy.
#
# bench_config LISTEN ADMIN UPSTREAM_URL [SHARDS] [PASSTHROUGH] [SPIN_US]   writes the TOML to stdout
#   BENCH_TLS_CERT / BENCH_TLS_KEY in the environment: HTTPS at the edge with that certificate and key
#   PASSTHROUGH=1: [cache] dedupe and cache off (every request forwarded); 0 (default): Prism's defaults
bench_config() {
  local listen=$1 admin=$2 upstream=$3 shards=${4:-1} passthrough=${5:-0} spin=${6:-0}
  cat <<TOML
[server]
listen = "$listen"
admin_listen = "$admin"
shards = $shards
pin_cores = false
spin_before_park_us = $spin
TOML
  if [[ -n "${BENCH_TLS_CERT:-}" ]]; then # perf/compare.sh TLS=1
    printf '\n[server.tls]\ncert = "%s"\nkey = "%s"\n' "$BENCH_TLS_CERT" "$BENCH_TLS_KEY"
  fi
  if [[ $passthrough == 1 ]]; then
    printf '\n[cache]\ndedupe = false\nenabled = false\n'
  fi
  cat <<TOML

[[networks]]
name = "bench"
kind = "evm"
chain_id = 4663

  [[networks.providers]]
  name = "fast"
  url = "$upstream"
TOML
}
