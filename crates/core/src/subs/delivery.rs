//! Each topic's one delivery task, so ordering is decided in one place: the inbox it reads, rebuilt with a
//! backfill when delivery falls behind, and which delivery rule (`heads`, `logs`, plain fan-out) each
//! notification goes to.

use std::rc::Rc;

use super::fan_out::{fan_out, Frame};
use super::hub::{Inbound, Topic};
use super::{heads, logs, TopicKind};
use crate::routing::route::NetworkRoute;
use prism_runtime::queue::{LocalQueue, PushError};
use prism_runtime::spawn;

impl Topic {
    /// Hands a notification to the topic's delivery task. A full inbox means delivery fell behind its
    /// upstream (a flood, or a slow backfill): what it held is dropped and the topic gets a fresh inbox
    /// and delivery task that starts with a backfill (heads by the watermark, logs by block range), so the
    /// topic is rebuilt instead of staying registered and silent.
    pub(super) fn hand_over(self: &Rc<Self>, route: &Rc<NetworkRoute>, item: Inbound) {
        let inbox = self.inbox.borrow().clone();
        if inbox.push(item) != Err(PushError::Full) {
            return;
        }
        inbox.clear();
        if route
            .shard
            .subs
            .heads
            .borrow()
            .as_ref()
            .is_some_and(|h| std::ptr::eq(Rc::as_ptr(h), Rc::as_ptr(self)))
        {
            // Logs were handed to this inbox too: each logs topic backfills what it may have lost.
            for t in route
                .shard
                .subs
                .topics
                .borrow()
                .values()
                .filter(|t| t.kind == TopicKind::Logs)
            {
                t.logs.backfilling.set(true);
                let _ = t.inbox.borrow().push(Inbound::Resubscribed);
            }
        }
        tracing::warn!(network = %route.name, topic = self.kind.name(), "subscription delivery fell behind its upstream; rebuilt with a backfill");
        route.shard.recorder.metrics().ws_topic_rebuilt();
        let fresh = LocalQueue::new(TOPIC_INBOX);
        *self.inbox.borrow_mut() = fresh.clone();
        self.logs.backfilling.set(self.kind == TopicKind::Logs);
        self.heads.linked.set(false);
        spawn_delivery(route, self, false);
        let _ = fresh.push(Inbound::Resubscribed);
    }
}

/// Notifications one topic may have waiting for delivery before it is rebuilt.
pub(super) const TOPIC_INBOX: usize = 4096;

/// Runs a topic's deliveries from its current inbox. `first`: the first `Resubscribed` is the initial
/// subscription (nothing to backfill); a rebuilt topic backfills on its first one.
pub(super) fn spawn_delivery(route: &Rc<NetworkRoute>, topic: &Rc<Topic>, first: bool) {
    let newest = route.shard.newest.clone();
    let topic = topic.clone();
    let inbox = topic.inbox.borrow().clone();
    spawn(async move {
        let mut first = first;
        while let Some(inbound) = inbox.pop().await {
            let Some(route) = newest.get() else { return };
            match inbound {
                Inbound::Resubscribed if first => {
                    first = false;
                    logs::backfilled(&route, &topic);
                }
                Inbound::Resubscribed => {
                    if topic.kind == TopicKind::Logs {
                        logs::backfill(&route, &topic).await;
                        logs::backfilled(&route, &topic);
                    }
                }
                Inbound::Log(logs_topic, log) => logs::in_order(&route, &logs_topic, log),
                Inbound::Item(result) => match topic.kind {
                    TopicKind::NewHeads => heads::deliver(&route, &topic, result).await,
                    TopicKind::Logs => logs::deliver(&route, &topic, &result).await,
                    TopicKind::PendingTransactions => fan_out(&route, &topic, &result, Frame::Plain),
                },
            }
        }
    });
}
