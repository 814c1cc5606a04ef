//! The call path: one call from where it enters the balancer to its answer. `ctx` (the call's facts, worked
//! out once), `pipeline` (local answers, cache and dedupe, submissions), `forward` (the retry loop over an
//! `exchange`; one attempt `hedged`, its answer judged into a `verdict`, a `fault` and what may follow it, an
//! unknown error's second opinion in `dispute`), `outcome` (what the edge is handed back), submissions after sending (`submit`,
//! `sync_submit`, `txhash`), verified reads (`verify`, `verify_rule`) and wide `eth_getLogs` split to fit
//! providers' limits (`logs`).

mod attempts;
pub mod ctx;
mod dispute;
pub mod exchange;
pub mod fault;
pub mod forward;
mod hedged;
pub mod logs;
pub mod outcome;
pub mod pipeline;
pub mod submit;
pub mod sync_submit;
pub mod txhash;
mod verdict;
pub mod verify;
pub mod verify_rule;
