//! Which provider carries a topic: the best one with a WebSocket when it opens, and another one when its
//! provider becomes unusable (breaker open, not admissible) or its link keeps failing.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::hub::{SubHub, Topic};
use crate::routing::route::NetworkRoute;
use prism_runtime::{sleep, spawn};
use prism_wire::rpc::ProviderId;

impl SubHub {
    /// Moves topics off providers that became unusable, every 250 ms while any topic exists.
    pub(super) fn ensure_supervisor(&self, route: &Rc<NetworkRoute>) {
        if self.supervisor.replace(true) {
            return;
        }
        let newest = route.shard.newest.clone();
        spawn(async move {
            loop {
                sleep(Duration::from_millis(250)).await;
                let Some(route) = newest.get() else { return };
                if route.life.shutdown.is_triggered() {
                    return;
                }
                let topics: Vec<(Vec<u8>, Rc<Topic>)> = route
                    .shard
                    .subs
                    .topics
                    .borrow()
                    .iter()
                    .map(|(k, t)| (k.clone(), t.clone()))
                    .collect();
                for (key, topic) in topics {
                    let Some(p) = topic.upstream.provider.get() else {
                        continue;
                    };
                    let link_down = route
                        .shard
                        .subs
                        .links
                        .borrow()
                        .get(&p)
                        .is_some_and(|l| l.failures.get() >= 3);
                    if usable(&route, p) && !link_down {
                        continue;
                    }
                    let mut avoid = topic.upstream.refused.borrow().clone();
                    avoid.push(p);
                    let Some(next) = pick_ws_provider(&route, &avoid).filter(|&n| usable(&route, n)) else {
                        continue;
                    };
                    tracing::warn!(network = %route.name, from = %route.upstreams[p].name, to = %route.upstreams[next].name,
                        topic = topic.kind.name(), "moving subscription to a healthy provider");
                    if let Some(upstream) = topic.upstream.id.borrow_mut().take() {
                        if let Some(link) = route.shard.subs.links.borrow().get(&p) {
                            link.by_upstream.borrow_mut().remove(&upstream);
                            link.send_unsubscribe(&upstream);
                        }
                    }
                    topic.upstream.provider.set(Some(next));
                    route.shard.subs.link(&route, next).subscribe(&key, &topic);
                }
            }
        });
    }
}

fn usable(route: &NetworkRoute, p: ProviderId) -> bool {
    let live = &route.live.providers()[p];
    route.live.admissible(p) && live.breaker.is_closed()
}

/// A provider with a WebSocket URL that has not refused the topic, preferring healthy and deep ones.
pub(super) fn pick_ws_provider(route: &NetworkRoute, refused: &[ProviderId]) -> Option<ProviderId> {
    ProviderId::all(route.upstreams.len())
        .filter(|&i| route.upstreams[i].ws.is_some() && !refused.contains(&i))
        .max_by_key(|&i| {
            (
                usable(route, i),
                route.live.providers()[i].heads.head.load(Ordering::Relaxed),
                std::cmp::Reverse(i),
            )
        })
}
