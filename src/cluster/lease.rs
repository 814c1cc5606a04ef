//! Shared limits through Redis: each sync tops up the tokens this node leases for every key limit and
//! provider quota shared across nodes ([`Sync::lease`]); without Redis each spends this node's share
//! ([`Sync::fall_back`]).

use std::sync::atomic::Ordering;

use super::link::LinkError;
use super::{bounded_grant, Sync};

/// Token bucket in Redis: refill at ARGV[1]/s up to ARGV[2], grant up to ARGV[3]. Uses Redis's clock.
pub(super) const LEASE_SCRIPT: &str = r#"
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
local grant = math.min(want, math.floor(tokens))
if grant < 0 then grant = 0 end
tokens = tokens - grant
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], 60000)
return grant
"#;

impl Sync {
    /// Tops up leased tokens for every shared limit: about two sync intervals' worth, at least one.
    pub(super) fn lease(&mut self) -> Result<(), LinkError> {
        let tick_s = self.cluster.sync_interval_ms as f64 / 1000.0;
        let mut wants: Vec<(String, f64, u32, i64, LeaseTarget)> = Vec::new();
        for (k, entry) in self.keys.entries().iter().enumerate() {
            if let Some(shared) = &entry.rate.shared {
                let target =
                    ((shared.rate_per_s * tick_s * 2.0).ceil() as i64).clamp(1, i64::from(shared.burst.max(1)));
                let stock = shared.stock.load(Ordering::Acquire);
                if stock < target {
                    wants.push((
                        self.key(&format!("bucket:key:{}", entry.name)),
                        shared.rate_per_s,
                        shared.burst,
                        target - stock,
                        LeaseTarget::Key(k),
                    ));
                }
            }
        }
        for (n, net) in self.config.networks.iter().enumerate() {
            for (i, p) in net.providers.iter().enumerate() {
                if let Some(q) = p.quota_rps {
                    let rate = f64::from(q);
                    let target = ((rate * tick_s * 2.0).ceil() as i64).max(1);
                    let stock = self.lives[n]
                        .slot(prism_wire::rpc::ProviderId::new(i))
                        .peer
                        .quota_stock
                        .load(Ordering::Acquire);
                    if stock < target {
                        let key = self.key(&format!("bucket:quota:{}:{}", net.name, p.name));
                        wants.push((key, rate, q, target - stock, LeaseTarget::Provider(n, i)));
                    }
                }
            }
        }
        for (key, rate, burst, want, target) in wants {
            let answered: i64 = self
                .redis
                .script
                .key(&key)
                .arg(rate)
                .arg(burst)
                .arg(want)
                .invoke(self.redis.conn.as_mut().expect("connected"))?;
            let granted = bounded_grant(answered, want);
            if granted != answered {
                self.refuse(
                    "token grant",
                    format_args!("{key}: Redis granted {answered} of {want} asked; using {granted}"),
                );
            }
            match target {
                LeaseTarget::Key(k) => {
                    if let Some(shared) = &self.keys.entries()[k].rate.shared {
                        shared.stock.fetch_add(granted, Ordering::AcqRel);
                        shared.active.store(true, Ordering::Release);
                    }
                }
                LeaseTarget::Provider(n, i) => {
                    let p = self.lives[n].slot(prism_wire::rpc::ProviderId::new(i));
                    p.peer.quota_stock.fetch_add(granted, Ordering::AcqRel);
                    p.peer.quota_leased.store(true, Ordering::Release);
                }
            }
        }
        Ok(())
    }

    /// Redis is away: every shared limit spends this node's share until it is back.
    pub(super) fn fall_back(&self) {
        for entry in self.keys.entries() {
            if let Some(shared) = &entry.rate.shared {
                if shared.active.swap(false, Ordering::AcqRel) {
                    shared.set_nodes(self.nodes);
                    shared.stock.store(0, Ordering::Release);
                }
            }
        }
        for live in &self.lives {
            for p in live.providers().iter() {
                // Quota falls back to local burn measurement (the router's own quota_burn).
                p.peer.quota_leased.store(false, Ordering::Release);
            }
        }
    }
}

enum LeaseTarget {
    Key(usize),
    Provider(usize, usize),
}
