//! Live provider state, shared by the shards as atomics and snapshots: the chain view and the head rule
//! (`state`), one provider's state in records by purpose (`provider`), breakers, block availability (`availability`: floors), finality tags, clients' high-water
//! marks, calls in flight per provider (`inflight`), quota and fair shares (`quota`), cordons, the chain
//! record cached answers are tied to (`chain`), and a Solana network's slots per side (`sides` data,
//! `slots` rules).

pub mod availability;
pub mod breaker;
pub mod chain;
pub mod cordon;
pub mod finality;
pub mod inflight;
pub mod marks;
pub mod provider;
pub mod quota;
pub mod sides;
pub mod slots;
pub mod state;
