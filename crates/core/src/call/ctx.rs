//! One call's facts, worked out once where the call enters the balancer (`pipeline::forward` for the EVM
//! edge, `forward::forward_as` for the Solana router and the balancer's own follow-up calls) and read by
//! every stage after it: the cache and dedupe (`core::call::pipeline`), the retry loop's marks and its choice of
//! provider (`core::call::forward`). Nothing downstream scans the params for the block again or works out again
//! whether the call reads the head, which finality tag it names, or which high-water mark holds it.

use std::cell::Cell;
use std::time::Instant;

use prism_wire::rpc::methods::{block_ref, BlockRef, Finality, HeadHint, MethodInfo};
use prism_wire::rpc::Call;

use crate::call::outcome::Caller;
use crate::live::finality::tag_of;
use crate::live::marks::MarkKey;
use crate::routing::route::NetworkRoute;

/// One call and what it means on its network, for as long as the balancer works on it. `Copy`: a stage that
/// sends it with another deadline or to fewer providers makes its own (`CallCtx { deadline, ..*cx }`).
#[derive(Clone, Copy)]
pub struct CallCtx<'a, 'c> {
    /// The call as the client sent it (its method and params are forwarded byte for byte).
    pub call: &'a Call<'c>,
    /// The method's row in the network's table: kind, family, head hint, which param is the block.
    pub info: MethodInfo,
    /// The block the params name, read from them once.
    pub block: BlockRef,
    /// The answer is (or names) the head: `eth_blockNumber`, or a `"latest"` block.
    pub latest: bool,
    /// A `safe` / `finalized` read (`core::live::finality`); never on a Solana network.
    pub tag: Option<Finality>,
    /// The high-water mark the call is held to: the caller's own, or its mark for `tag`.
    pub mark_key: MarkKey,
    pub caller: &'a Caller,
    pub deadline: Instant,
    /// The shard's counter of upstream request ids.
    pub ids: &'a Cell<u64>,
}

impl<'a, 'c> CallCtx<'a, 'c> {
    /// Reads the call's block parameter and works out its head, tag and mark on `route`.
    pub fn new(
        route: &NetworkRoute,
        call: &'a Call<'c>,
        info: MethodInfo,
        caller: &'a Caller,
        deadline: Instant,
        ids: &'a Cell<u64>,
    ) -> Self {
        let block = block_ref(&info, call.params);
        let tag = tag_of(block).filter(|_| route.policy.chain.single_chain());
        CallCtx {
            call,
            info,
            block,
            latest: info.head == HeadHint::ResultIsHead || block == BlockRef::Latest,
            tag,
            mark_key: tag.map_or(caller.mark, |t| route.live.tag_mark(caller.mark, t)),
            caller,
            deadline,
            ids,
        }
    }

    /// The next upstream request id of this shard.
    pub fn next_id(&self) -> u64 {
        let id = self.ids.get();
        self.ids.set(id.wrapping_add(1));
        id
    }
}
