//! The fan-out of one notification to every subscriber of its topic: laid out once, handed to each with its
//! own id, heads never twice nor backwards per subscriber.

use super::hub::{Note, Outgoing, Topic};
use crate::routing::route::NetworkRoute;

/// What a frame is to the subscribers of its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frame {
    /// A log or a pending transaction: to everyone.
    Plain,
    /// A head at this height: to each subscriber only above the greatest it was given.
    Head(u64),
    /// A head at this height that replaces one already delivered (a reorg): to each subscriber that was
    /// given heads, whatever it was given.
    Replacing(u64),
}

/// Sends `result` to every subscriber of the topic, as `frame` says: the notification is laid out once and
/// each subscriber is handed it with its own id. A subscriber that cannot keep up is disconnected.
pub(super) fn fan_out(route: &NetworkRoute, topic: &Topic, result: &[u8], frame: Frame) {
    let subscribers = topic.subscribers.borrow().clone();
    let note = Note::eth_subscription(result);
    for s in subscribers {
        match frame {
            Frame::Plain => {}
            // Never twice, never backwards, per subscriber.
            Frame::Head(h) if h <= s.last_head.get() => continue,
            Frame::Replacing(_) if !s.got_heads.get() => continue,
            Frame::Head(h) | Frame::Replacing(h) => {
                s.last_head.set(s.last_head.get().max(h));
                s.got_heads.set(true);
                route.live.marks.raise(s.mark, h);
            }
        }
        // A full queue closes itself: the client is disconnected with a reason, others are unaffected.
        let _ = s.out.push(Outgoing::Note(note.clone(), s.id_json.clone()));
    }
}
