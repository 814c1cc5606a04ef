//! A node's view as it travels through Redis: written one fact per line for peers ([`Sync::payload`]), and
//! a peer's read back and folded into this node's atomics, bounded first ([`Sync::apply`],
//! [`Sync::share_demands`]).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::{bounded_head, Peer, Sync};
use prism_core::live::marks::MarkKey;
use prism_telemetry::clock::now_ms;

impl Sync {
    /// This node's view, one fact per line.
    pub(super) fn payload(&self) -> String {
        let mut out = String::from("v1\n");
        // Networks and providers by name: peers' configs need not list them in the same order.
        for (n, live) in self.lives.iter().enumerate() {
            let net = &self.config.networks[n];
            let _ = writeln!(out, "net {} {}", net.name, live.heads.best_head.load(Ordering::Relaxed));
            let health = live.health.load();
            for (i, c) in net.providers.iter().enumerate().filter(|(_, c)| !c.retired) {
                let p = live.slot(prism_wire::rpc::ProviderId::new(i));
                let h = health.providers.get(i).cloned().unwrap_or_default();
                let open = !p.breaker.is_closed()
                    || p.heads.drifted.load(Ordering::Relaxed)
                    || p.heads.outlier.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "prov {} {} {} {} {} {}",
                    net.name,
                    c.name,
                    u8::from(open),
                    p.heads.head.load(Ordering::Relaxed),
                    h.overall.p50_us,
                    (h.overall.error_rate() * 1e6) as u64
                );
            }
            let keys = std::iter::once((0, "-")).chain(self.keys.entries().iter().map(|e| (e.index, e.name.as_str())));
            for (k, key) in keys {
                let m = live.marks.get(MarkKey::Key(k));
                if m > 0 {
                    let _ = writeln!(out, "mark {} {key} {m}", net.name);
                }
            }
            // Each key's demand on each quota-limited provider (fair shares): peers fill the quota with it.
            if live.quota.fair_on() {
                for (i, c) in net.providers.iter().enumerate().filter(|(_, c)| c.quota_rps.is_some()) {
                    for (k, credits) in live.quota.local_demand(prism_wire::rpc::ProviderId::new(i)) {
                        let name = if k == 0 {
                            Some("-")
                        } else {
                            self.keys
                                .entries()
                                .iter()
                                .find(|e| e.index == k)
                                .map(|e| e.name.as_str())
                        };
                        if let Some(name) = name {
                            let _ = writeln!(out, "fair {} {} {name} {}", net.name, c.name, (credits * 1000.0) as u64);
                        }
                    }
                }
            }
        }
        out
    }

    /// Folds a peer's view into this node's atomics. Heads and marks above `ceilings[n]` (where this node's own
    /// believed heads say network `n` can plausibly be) are ignored.
    pub(super) fn apply(
        &self,
        peer: &str,
        payload: &str,
        ceilings: &[Option<u64>],
        demands: &mut Vec<(usize, usize, usize, f64)>,
    ) -> Peer {
        let until = now_ms() + self.cluster.ttl_ms;
        let mut open = Vec::new();
        let mut best_heads = vec![0; self.lives.len()];
        let network = |name: &str| self.config.networks.iter().position(|n| n.name == name);
        for line in payload.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
            let Some(n) = f.get(1).and_then(|name| network(name)) else {
                continue;
            };
            let live = &self.lives[n];
            match f.first() {
                Some(&"net") => {
                    // Advisory: ranks providers, never excludes one (drift uses this node's own view).
                    match num(2).map(|best| (best, bounded_head(best, ceilings[n]))) {
                        Some((_, Some(best))) => best_heads[n] = best,
                        Some((best, None)) => self.refuse(
                            "best head",
                            format_args!("peer {peer} reports {best} on {}, beyond {:?}", f[1], ceilings[n]),
                        ),
                        None => {}
                    }
                }
                Some(&"prov") => {
                    let provider = f
                        .get(2)
                        .and_then(|p| self.config.networks[n].providers.iter().position(|c| c.name == *p));
                    if let (Some(i), Some(1)) = (provider, num(3)) {
                        live.slot(prism_wire::rpc::ProviderId::new(i))
                            .peer
                            .open_until_ms
                            .fetch_max(until, Ordering::AcqRel);
                        open.push(format!(
                            "{}/{}",
                            self.config.networks[n].name, self.config.networks[n].providers[i].name
                        ));
                    }
                }
                Some(&"fair") => {
                    // A peer's key demand on a quota-limited provider, in thousandths of a credit per second.
                    let provider = f
                        .get(2)
                        .and_then(|p| self.config.networks[n].providers.iter().position(|c| c.name == *p));
                    let key = match f.get(3) {
                        Some(&"-") => Some(0),
                        Some(name) => self.keys.entries().iter().find(|e| e.name == *name).map(|e| e.index),
                        None => None,
                    };
                    if let (Some(i), Some(k), Some(d)) = (provider, key, num(4)) {
                        demands.push((n, i, k, d as f64 / 1000.0));
                    }
                }
                Some(&"mark") => {
                    let key = match f.get(2) {
                        Some(&"-") => Some(0),
                        Some(name) => self.keys.entries().iter().find(|e| e.name == *name).map(|e| e.index),
                        None => None,
                    };
                    if let (Some(k), Some(h)) = (key, num(3)) {
                        match bounded_head(h, ceilings[n]) {
                            Some(h) => live.marks.raise(MarkKey::Key(k), h),
                            None => self.refuse(
                                "mark",
                                format_args!("peer {peer} reports mark {h} on {}, beyond {:?}", f[1], ceilings[n]),
                            ),
                        }
                    }
                }
                _ => {}
            }
        }
        Peer {
            id: peer.to_string(),
            open,
            best_heads,
        }
    }

    /// Peers' key demands on quota-limited providers (summed over peers) go to each provider's fair shares,
    /// bounded there (`core::live::quota::PEER_DEMAND_BOUND`) and valid for a ttl.
    pub(super) fn share_demands(&self, mut demands: Vec<(usize, usize, usize, f64)>) {
        let until = now_ms() + self.cluster.ttl_ms;
        demands.sort_by_key(|d| (d.0, d.1, d.2));
        for (n, live) in self.lives.iter().enumerate() {
            if !live.quota.fair_on() {
                continue;
            }
            for (i, c) in self.config.networks[n].providers.iter().enumerate() {
                if c.quota_rps.is_none() {
                    continue;
                }
                let mut per_key: Vec<(usize, f64)> = Vec::new();
                for d in demands.iter().filter(|d| d.0 == n && d.1 == i) {
                    match per_key.last_mut() {
                        Some(last) if last.0 == d.2 => last.1 += d.3,
                        _ => per_key.push((d.2, d.3)),
                    }
                }
                let cut = live
                    .quota
                    .set_peer_demand(prism_wire::rpc::ProviderId::new(i), &per_key, until);
                if cut > 0 {
                    self.refuse(
                        "key demand",
                        format_args!(
                            "{cut} peer demands on {}/{} beyond the bound",
                            self.config.networks[n].name, c.name
                        ),
                    );
                }
            }
        }
    }
}
