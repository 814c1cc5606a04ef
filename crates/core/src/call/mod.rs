//! The call path: one call from where it enters the balancer to its answer. `ctx` (the call's facts, worked
//! out once), `pipeline` (local answers, cache and dedupe, submissions), `forward` (the retry loop over an
//! `exchange`), `outcome` (what the edge is handed back), submissions after sending (`submit`,
//! `sync_submit`, `txhash`), verified reads (`verify`, `verify_rule`) and wide `eth_getLogs` split to fit
//! providers' limits (`logs`).

pub mod ctx;
pub mod exchange;
pub mod fault;
pub mod forward;
pub mod logs;
pub mod outcome;
pub mod pipeline;
pub mod submit;
pub mod sync_submit;
pub mod txhash;
pub mod verify;
pub mod verify_rule;
