//! Test-only builders of config values other modules' unit tests start from.

use super::{Network, NetworkKind, Provider};

/// An EVM network "t" of `n` providers `p0`.. on unused loopback ports: 250 ms blocks, drift 10,
/// tolerance 2, no chain id.
pub fn network(n: usize) -> Network {
    Network {
        name: "t".into(),
        kind: NetworkKind::Evm,
        chain_id: None,
        probe_interval_ms: 1000,
        max_drift_blocks: 10,
        hwm_tolerance_blocks: 2,
        block_time_ms: 250,
        head_slack_blocks: 128,
        cache_depth_blocks: 64,
        delegation_program: None,
        default_er: None,
        max_slot_drift: 150,
        slot_stall_ms: 10_000,
        slot_stall_slots: 20,
        methods: Default::default(),
        providers: (0..n)
            .map(|i| Provider {
                name: format!("p{i}"),
                url: format!("http://127.0.0.1:{}", 1000 + i),
                ws_url: None,
                region: None,
                weight: 1.0,
                quota_rps: None,
                overflow: false,
                role: None,
                identity: None,
                public_url: None,
                base_fee: None,
                block_time_ms: None,
                country_code: None,
                operator: None,
                retired: false,
                floor_block: 0,
                max_logs_range: None,
                max_logs_results: None,
                auth: Default::default(),
                sync_submit: Default::default(),
                credits: None,
            })
            .collect(),
    }
}
