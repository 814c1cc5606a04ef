//! Where a call goes: the network's route (`route`: what a generation fixes and what the shard owns), the
//! router that picks a provider (`router`) and when a late read is hedged to a second one (`hedge`).

pub mod hedge;
pub mod route;
pub mod router;
