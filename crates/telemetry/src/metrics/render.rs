//! `/metrics`: every shard's counters and histograms, summed, in Prometheus text format, one section per
//! area (calls, upstreams, keys, reuse, settling, subscriptions, HTTP refusals).

use super::*;

/// Writes the counters and histograms of every shard, summed, in Prometheus text format.
pub fn render(out: &mut String, shards: &[&ShardMetrics], labels: &Labels<'_>) {
    render_calls(out, shards, labels);
    render_upstreams(out, shards, labels);
    render_keys(out, shards, labels);
    render_reuse(out, shards);
    render_settling(out, shards);
    render_subscriptions(out, shards);
    render_refusals(out, shards);
}

/// Calls answered by network, method and result, and their latency.
fn render_calls(out: &mut String, shards: &[&ShardMetrics], labels: &Labels<'_>) {
    out.push_str("# HELP prism_calls_total JSON-RPC calls answered, by network, method and result.\n");
    out.push_str("# TYPE prism_calls_total counter\n");
    let mut seen = Vec::new();
    for (n, (net, _)) in labels.networks.iter().enumerate() {
        for (m, method) in KNOWN_METHODS.iter().chain(std::iter::once(&"other")).enumerate() {
            let mut any = false;
            for (r, result) in CALL_RESULTS.iter().enumerate() {
                let v = sum(shards, |s| s.networks[n].methods[m].results[r].load(Ordering::Relaxed));
                if v > 0 {
                    any = true;
                    let _ = writeln!(
                        out,
                        "prism_calls_total{{network=\"{net}\",method=\"{method}\",result=\"{result}\"}} {v}"
                    );
                }
            }
            if any {
                seen.push((n, m, *net, *method));
            }
        }
    }
    out.push_str("# HELP prism_call_duration_seconds Time to answer a call, by network and method.\n");
    out.push_str("# TYPE prism_call_duration_seconds histogram\n");
    for (n, m, net, method) in seen {
        let l = format!("network=\"{net}\",method=\"{method}\"");
        histogram(out, "prism_call_duration_seconds", &l, shards, |s| {
            &s.networks[n].methods[m].latency
        });
    }
}

/// Upstream attempts, probes and failures by provider, and their latency.
fn render_upstreams(out: &mut String, shards: &[&ShardMetrics], labels: &Labels<'_>) {
    out.push_str("# HELP prism_upstream_attempts_total Upstream attempts of client calls (health probes apart, in prism_upstream_probes_total), by provider and result.\n");
    out.push_str("# TYPE prism_upstream_attempts_total counter\n");
    for (n, (net, providers)) in labels.networks.iter().enumerate() {
        for (p, entry) in providers.iter().enumerate() {
            let Some((provider, region)) = entry else { continue };
            for (r, result) in ATTEMPT_RESULTS.iter().enumerate() {
                let v = sum(shards, |s| {
                    s.networks[n].providers[p].results[r].load(Ordering::Relaxed)
                });
                let mut l = String::new();
                label(&mut l, provider);
                let _ = writeln!(
                    out,
                    "prism_upstream_attempts_total{{network=\"{net}\",provider=\"{l}\",region=\"{region}\",result=\"{result}\"}} {v}"
                );
            }
        }
    }
    out.push_str(
        "# HELP prism_upstream_probes_total Health probes (eth_blockNumber, getHealth), by provider and result.\n",
    );
    out.push_str("# TYPE prism_upstream_probes_total counter\n");
    for (n, (net, providers)) in labels.networks.iter().enumerate() {
        for (p, entry) in providers.iter().enumerate() {
            let Some((provider, region)) = entry else { continue };
            let mut l = String::new();
            label(&mut l, provider);
            for (r, result) in ATTEMPT_RESULTS.iter().enumerate() {
                let v = sum(shards, |s| s.networks[n].providers[p].probes[r].load(Ordering::Relaxed));
                let _ = writeln!(
                    out,
                    "prism_upstream_probes_total{{network=\"{net}\",provider=\"{l}\",region=\"{region}\",result=\"{result}\"}} {v}"
                );
            }
        }
    }
    out.push_str("# HELP prism_upstream_failures_total Failed and throttled upstream attempts by reason (http_401, timeout, refused, ...) and by whom: client calls or health probes. Only reasons seen are listed.\n");
    out.push_str("# TYPE prism_upstream_failures_total counter\n");
    for (n, (net, providers)) in labels.networks.iter().enumerate() {
        for (p, entry) in providers.iter().enumerate() {
            let Some((provider, region)) = entry else { continue };
            let mut l = String::new();
            label(&mut l, provider);
            for (k, by) in ["client", "probe"].iter().enumerate() {
                for r in Reason::ALL {
                    let v = sum(shards, |s| {
                        s.networks[n].providers[p].reasons[k][r as usize].load(Ordering::Relaxed)
                    });
                    if v > 0 {
                        let _ = writeln!(
                            out,
                            "prism_upstream_failures_total{{network=\"{net}\",provider=\"{l}\",region=\"{region}\",by=\"{by}\",reason=\"{}\"}} {v}",
                            r.as_str()
                        );
                    }
                }
            }
        }
    }
    out.push_str("# HELP prism_upstream_duration_seconds Upstream attempt latency of client calls, by provider.\n");
    out.push_str("# TYPE prism_upstream_duration_seconds histogram\n");
    for (n, (net, providers)) in labels.networks.iter().enumerate() {
        for (p, entry) in providers.iter().enumerate() {
            let Some((provider, region)) = entry else { continue };
            let mut l = String::new();
            label(&mut l, provider);
            let l = format!("network=\"{net}\",provider=\"{l}\",region=\"{region}\"");
            histogram(out, "prism_upstream_duration_seconds", &l, shards, |s| {
                &s.networks[n].providers[p].latency
            });
        }
    }
}

/// Per-key requests, throttles, fair-share refusals and credits.
fn render_keys(out: &mut String, shards: &[&ShardMetrics], labels: &Labels<'_>) {
    let keys: Vec<&str> = std::iter::once("-").chain(labels.keys.iter().copied()).collect();
    for (name, help, throttled) in [
        (
            "prism_key_requests_total",
            "Requests per API key (\"-\" = no key).",
            false,
        ),
        (
            "prism_key_throttled_total",
            "Requests refused by the key's rate limit.",
            true,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        for (k, key) in keys.iter().enumerate() {
            let mut l = String::new();
            label(&mut l, key);
            let v = sum(shards, |s| {
                s.keys.get(k).map_or(0, |m| {
                    if throttled { &m.throttled } else { &m.requests }.load(Ordering::Relaxed)
                })
            });
            let _ = writeln!(out, "{name}{{key=\"{l}\"}} {v}");
        }
    }
    let over: Vec<u64> = (0..keys.len())
        .map(|k| {
            sum(shards, |s| {
                s.keys.get(k).map_or(0, |m| m.over_share.load(Ordering::Relaxed))
            })
        })
        .collect();
    if over.iter().any(|&v| v > 0) {
        out.push_str("# HELP prism_key_over_share_total Calls not sent to a provider because the key had spent its fair share of the provider's quota ([policy.fair_share]).\n# TYPE prism_key_over_share_total counter\n");
        for (key, v) in keys.iter().zip(over) {
            let mut l = String::new();
            label(&mut l, key);
            let _ = writeln!(out, "prism_key_over_share_total{{key=\"{l}\"}} {v}");
        }
    }
    render_credits(out, labels, &keys, shards);
}

/// The cache, dedupe joins and hedged reads.
fn render_reuse(out: &mut String, shards: &[&ShardMetrics]) {
    for (i, (name, help)) in [
        (
            "prism_cache_hits_total",
            "Calls answered from the deterministic-result cache.",
        ),
        ("prism_cache_misses_total", "Cacheable calls that had to go upstream."),
        (
            "prism_dedupe_joins_total",
            "Calls that joined an identical in-flight read instead of going upstream.",
        ),
    ]
    .iter()
    .enumerate()
    {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        let _ = writeln!(
            out,
            "{name} {}",
            sum(shards, |s| s.cache.reuse[i].load(Ordering::Relaxed))
        );
    }
    for (i, (name, help, kind)) in [
        (
            "prism_cache_bytes",
            "Bytes held by the caches (keys and values), all shards.",
            "gauge",
        ),
        (
            "prism_cache_entries",
            "Entries held by the caches, all shards.",
            "gauge",
        ),
        (
            "prism_cache_evictions_total",
            "Entries evicted to keep the memory bound.",
            "counter",
        ),
    ]
    .iter()
    .enumerate()
    {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        let _ = writeln!(
            out,
            "{name} {}",
            sum(shards, |s| s.cache.size[i].load(Ordering::Relaxed))
        );
    }
    for (i, (name, help)) in [
        (
            "prism_hedges_total",
            "Hedged reads sent: a second provider asked because the first was later than its p95.",
        ),
        ("prism_hedges_won_total", "Hedged reads whose hedge answered first."),
    ]
    .iter()
    .enumerate()
    {
        let v = sum(shards, |s| {
            if i == 0 {
                s.reads.hedges[0].load(Ordering::Relaxed) + s.reads.hedges[1].load(Ordering::Relaxed)
            } else {
                s.reads.hedges[1].load(Ordering::Relaxed)
            }
        });
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
    }
}

/// How calls were settled: second opinions, submissions, verified reads, unknown methods.
fn render_settling(out: &mut String, shards: &[&ShardMetrics]) {
    let settled = |i: usize| sum(shards, |s| s.reads.settled[i].load(Ordering::Relaxed));
    labelled_counter(
        out,
        "prism_second_opinions_total",
        "Errors no rule knows, asked again of another provider, by whose fault the answer showed.",
        "outcome",
        &["client", "provider", "inconclusive"],
        settled,
    );
    labelled_counter(
        out,
        "prism_unknown_errors_unasked_total",
        "Errors no rule knows, settled without a second opinion: by a remembered verdict, one already in flight, or no other provider.",
        "how",
        &["remembered_client", "remembered_provider", "pending", "alone"],
        |i| settled(3 + i),
    );
    labelled_counter(
        out,
        "prism_submissions_settled_total",
        "Transaction submissions whose first answer left the client unsure (lost after sending, already known, nonce too low), by how Prism settled it with reads.",
        "how",
        &["lost_found", "lost_unresolved", "already_known", "mined_before"],
        |i| sum(shards, |s| s.writes.submitted[i].load(Ordering::Relaxed)),
    );
    labelled_counter(
        out,
        "prism_sync_submissions_emulated_total",
        "eth_sendRawTransactionSync calls sent as eth_sendRawTransaction to a provider that lacks the method, by how Prism's wait for the receipt ended.",
        "outcome",
        &["receipt", "timeout"],
        |i| sum(shards, |s| s.writes.sync_emulated[i].load(Ordering::Relaxed)),
    );
    labelled_counter(
        out,
        "prism_verified_reads_total",
        "Verified reads (keys with verify): agreed at once, settled by more providers after a disagreement, disagreed (-32097), short of a quorum (-32096), answered unverified (when_short).",
        "outcome",
        &["agreed", "settled", "disagreed", "short", "unverified"],
        |i| sum(shards, |s| s.reads.verified[i].load(Ordering::Relaxed)),
    );
    let _ = writeln!(
        out,
        "# HELP prism_unknown_method_calls_total Calls of methods Prism's table does not know: sent once, never retried after sending, joined or cached (declare reads in [networks.methods]).\n# TYPE prism_unknown_method_calls_total counter"
    );
    let _ = writeln!(
        out,
        "prism_unknown_method_calls_total {}",
        sum(shards, |s| s.writes.unknown_methods.load(Ordering::Relaxed))
    );
}

/// Client and upstream WebSockets, and the Solana router's delegation tracking.
fn render_subscriptions(out: &mut String, shards: &[&ShardMetrics]) {
    let ws = |i: usize| shards.iter().map(|s| s.ws[i].load(Ordering::Relaxed)).sum::<i64>();
    let _ = writeln!(
        out,
        "# HELP prism_ws_clients Open client WebSocket connections.\n# TYPE prism_ws_clients gauge"
    );
    let _ = writeln!(out, "prism_ws_clients {}", ws(0));
    let _ = writeln!(
        out,
        "# HELP prism_ws_upstream_subscriptions Upstream subscriptions (shared by identical client ones), by type.\n# TYPE prism_ws_upstream_subscriptions gauge"
    );
    for (i, kind) in ["newHeads", "logs", "newPendingTransactions"].iter().enumerate() {
        let _ = writeln!(out, "prism_ws_upstream_subscriptions{{type=\"{kind}\"}} {}", ws(1 + i));
    }
    for (i, (name, help)) in [
        (
            "prism_ws_upstream_reconnects_total",
            "Upstream WebSocket connections lost and re-established.",
        ),
        (
            "prism_ws_backfilled_heads_total",
            "Heads fetched to fill a gap in a newHeads stream.",
        ),
        (
            "prism_ws_backfilled_logs_total",
            "Logs fetched with eth_getLogs to fill a gap in a logs stream.",
        ),
        (
            "prism_ws_upstream_unresponsive_total",
            "Upstream WebSockets dropped because they stopped answering pings (frozen peer, half-open TCP).",
        ),
        (
            "prism_ws_topic_rebuilds_total",
            "Subscriptions whose delivery fell behind the upstream and were rebuilt with a backfill.",
        ),
        (
            "prism_ws_reorgs_total",
            "Reorgs a provider announced on newHeads (heads replaced below the last delivered), delivered again.",
        ),
    ]
    .iter()
    .enumerate()
    {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", ws(4 + i));
    }
    for (i, (name, help, kind)) in [
        (
            "prism_solana_tracked_accounts",
            "Accounts in the delegation tables (each shard keeps its own).",
            "gauge",
        ),
        (
            "prism_solana_delegated_accounts",
            "Tracked accounts currently delegated to an ephemeral rollup.",
            "gauge",
        ),
        (
            "prism_solana_record_reads_total",
            "Delegation records read from the base layer over HTTP.",
            "counter",
        ),
        (
            "prism_solana_base_link_drops_total",
            "Base-layer record subscription sockets lost (their accounts went into limbo).",
            "counter",
        ),
        (
            "prism_solana_rerouted_total",
            "Answers served from the wrong side and asked again of the ephemeral rollup.",
            "counter",
        ),
        (
            "prism_solana_subscription_sockets",
            "Upstream WebSockets carrying client subscriptions (shared by every client of a shard).",
            "gauge",
        ),
        (
            "prism_solana_subscription_topics",
            "Upstream subscriptions held for clients (identical client subscriptions share one).",
            "gauge",
        ),
        (
            "prism_solana_caught_up_total",
            "Notifications delivered after a lost subscription socket came back (a change missed in the gap).",
            "counter",
        ),
    ]
    .iter()
    .enumerate()
    {
        let v = shards.iter().map(|s| s.solana[i].load(Ordering::Relaxed)).sum::<i64>();
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    }
}

/// Requests refused at the HTTP layer.
fn render_refusals(out: &mut String, shards: &[&ShardMetrics]) {
    out.push_str("# HELP prism_http_refusals_total Requests refused at the HTTP layer, by status.\n");
    out.push_str("# TYPE prism_http_refusals_total counter\n");
    for (i, status) in REFUSAL_STATUSES.iter().enumerate() {
        let v = sum(shards, |s| s.refusals[i].1.load(Ordering::Relaxed));
        let _ = writeln!(out, "prism_http_refusals_total{{status=\"{status}\"}} {v}");
    }
}
