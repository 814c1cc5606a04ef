//! What the status page draws: per provider, one point every [`POINT_MS`] over the last [`POINTS`] points
//! (15 minutes), and a bounded timeline of state changes per network. Kept by the health aggregator thread
//! (no external service) and published inside its snapshot; time is a parameter so the rules are unit-tested.

use std::collections::VecDeque;

/// One point per provider every 10 s.
pub const POINT_MS: u64 = 10_000;
/// 90 points: the last 15 minutes.
pub const POINTS: usize = 90;
/// State changes kept per network.
pub const TIMELINE_EVENTS: usize = 100;

/// One provider over one interval (not a rolling figure: only that interval's calls).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Point {
    /// End of the interval, ms on the process clock.
    pub at_ms: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub calls: u64,
    pub failures: u64,
    /// Of `calls`, Prism's own health probes.
    pub probes: u64,
    /// This provider's client calls over all the network's client calls in the interval, 0..1.
    pub share: f64,
}

impl Point {
    pub fn error_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.failures as f64 / self.calls as f64
        }
    }
}

/// A fixed-capacity ring: the oldest point falls out when a new one comes past `cap`.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: VecDeque<T>,
    cap: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring::new(POINTS)
    }
}

impl<T> Ring<T> {
    pub fn new(cap: usize) -> Self {
        Ring {
            items: VecDeque::with_capacity(cap.max(1)),
            cap: cap.max(1),
        }
    }

    pub fn push(&mut self, item: T) {
        if self.items.len() == self.cap {
            self.items.pop_front();
        }
        self.items.push_back(item);
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn last(&self) -> Option<&T> {
        self.items.back()
    }
}

/// When the next point is due: every `every_ms` from the first call, never twice for one tick and never
/// more than one point for a long gap (a stalled thread does not invent empty points).
#[derive(Debug, Clone, Copy)]
pub struct Ticker {
    every_ms: u64,
    next_ms: u64,
}

impl Ticker {
    pub fn new(start_ms: u64, every_ms: u64) -> Self {
        Ticker {
            every_ms: every_ms.max(1),
            next_ms: start_ms + every_ms.max(1),
        }
    }

    /// Whether a point is due at `now_ms`; if so the next one is scheduled.
    pub fn due(&mut self, now_ms: u64) -> bool {
        if now_ms < self.next_ms {
            return false;
        }
        let behind = (now_ms - self.next_ms) / self.every_ms;
        self.next_ms += (behind + 1) * self.every_ms;
        true
    }
}

/// One change of a provider's state (`ProviderLive::describe`), as the aggregator saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub at_ms: u64,
    pub provider: usize,
    pub from: &'static str,
    pub to: &'static str,
}

/// The network's last [`TIMELINE_EVENTS`] state changes, and each provider's last seen state.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    events: Ring<Event>,
    last: Vec<Option<&'static str>>,
}

impl Timeline {
    pub fn new(providers: usize, cap: usize) -> Self {
        Timeline {
            events: Ring::new(cap),
            last: vec![None; providers],
        }
    }

    /// Notes `provider`'s state now; a change from the last seen state becomes an event. The first state
    /// seen is the starting point, not an event.
    pub fn observe(&mut self, at_ms: u64, provider: usize, state: &'static str) {
        let Some(slot) = self.last.get_mut(provider) else {
            return;
        };
        match *slot {
            Some(prev) if prev != state => self.events.push(Event {
                at_ms,
                provider,
                from: prev,
                to: state,
            }),
            _ => {}
        }
        *slot = Some(state);
    }

    /// Room for `providers` providers.
    pub fn grow(&mut self, providers: usize) {
        if self.last.len() < providers {
            self.last.resize(providers, None);
        }
    }

    /// The state last seen for `provider` (`None` before the first).
    pub fn last_state(&self, provider: usize) -> Option<&'static str> {
        self.last.get(provider).copied().flatten()
    }

    /// Oldest first.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.events.iter()
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// What the status page shows of one network's past: a ring of points per provider and the timeline.
#[derive(Debug, Clone, Default)]
pub struct NetworkHistory {
    pub providers: Vec<Ring<Point>>,
    pub timeline: Timeline,
}

impl NetworkHistory {
    pub fn new(providers: usize) -> Self {
        NetworkHistory {
            providers: (0..providers).map(|_| Ring::new(POINTS)).collect(),
            timeline: Timeline::new(providers, TIMELINE_EVENTS),
        }
    }

    /// Room for `providers` slots (a reload added providers): new ones start with empty rings.
    pub fn grow(&mut self, providers: usize) {
        while self.providers.len() < providers {
            self.providers.push(Ring::new(POINTS));
        }
        self.timeline.grow(providers);
    }

    /// Adds one point per provider (closed intervals, in provider order), filling in shares of the
    /// network's client calls (probes are not traffic).
    pub fn push_points(&mut self, mut points: Vec<Point>) {
        let total: u64 = points.iter().map(|p| p.calls - p.probes).sum();
        for (ring, p) in self.providers.iter_mut().zip(points.iter_mut()) {
            if total > 0 {
                p.share = (p.calls - p.probes) as f64 / total as f64;
            }
            ring.push(*p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at_ms: u64, calls: u64, failures: u64) -> Point {
        Point {
            at_ms,
            p50_us: 1_000,
            p99_us: 2_000,
            calls,
            failures,
            probes: 0,
            share: 0.0,
        }
    }

    #[test]
    fn the_ring_keeps_the_last_ninety_points_oldest_first() {
        let mut h = NetworkHistory::new(1);
        for k in 1..=100u64 {
            h.push_points(vec![point(k * POINT_MS, k, 0)]);
        }
        let ring = &h.providers[0];
        assert_eq!(ring.len(), POINTS);
        let at: Vec<u64> = ring.iter().map(|p| p.at_ms).collect();
        assert_eq!(at.first(), Some(&(11 * POINT_MS)), "the ten oldest fell out");
        assert_eq!(at.last(), Some(&(100 * POINT_MS)));
        assert!(
            at.windows(2).all(|w| w[1] - w[0] == POINT_MS),
            "one point per interval: {at:?}"
        );
        assert_eq!(ring.last().map(|p| p.calls), Some(100));
    }

    #[test]
    fn a_point_has_its_error_rate_and_its_share_of_the_networks_calls() {
        let mut h = NetworkHistory::new(2);
        h.push_points(vec![point(POINT_MS, 30, 15), point(POINT_MS, 10, 0)]);
        let a = *h.providers[0].last().unwrap();
        let b = *h.providers[1].last().unwrap();
        assert!((a.error_rate() - 0.5).abs() < 1e-9, "{a:?}");
        assert!((a.share - 0.75).abs() < 1e-9 && (b.share - 0.25).abs() < 1e-9);
        assert_eq!(b.error_rate(), 0.0);
        // A quiet interval: no share, no error rate (nothing divided by zero).
        h.push_points(vec![point(2 * POINT_MS, 0, 0), point(2 * POINT_MS, 0, 0)]);
        let a = *h.providers[0].last().unwrap();
        assert_eq!((a.share, a.error_rate()), (0.0, 0.0));
    }

    #[test]
    fn the_ticker_fires_once_per_interval_and_skips_a_gap() {
        let mut t = Ticker::new(1_000, POINT_MS);
        assert!(!t.due(1_000));
        assert!(!t.due(10_999));
        assert!(t.due(11_000));
        assert!(!t.due(11_200), "twice in one interval");
        assert!(t.due(21_050));
        // A 35 s stall gives one point, then the grid continues.
        assert!(t.due(56_000));
        assert!(!t.due(56_100));
        assert!(!t.due(60_999));
        assert!(t.due(61_000));
    }

    #[test]
    fn the_timeline_records_changes_only_and_keeps_the_last_hundred() {
        let mut t = Timeline::new(2, TIMELINE_EVENTS);
        t.observe(1, 0, "closed");
        t.observe(2, 0, "closed");
        t.observe(2, 1, "closed");
        assert!(t.is_empty(), "the first state and a repeat are not changes");
        t.observe(3, 0, "open");
        t.observe(4, 0, "half-open");
        t.observe(5, 0, "closed");
        let seen: Vec<(&str, &str)> = t.events().map(|e| (e.from, e.to)).collect();
        assert_eq!(
            seen,
            [("closed", "open"), ("open", "half-open"), ("half-open", "closed")]
        );
        for k in 0..300u64 {
            t.observe(10 + k, 1, if k % 2 == 0 { "open-drift" } else { "closed" });
        }
        assert_eq!(t.len(), TIMELINE_EVENTS);
        let first = t.events().next().unwrap();
        assert_eq!(first.at_ms, 10 + 300 - TIMELINE_EVENTS as u64, "the oldest fell out");
        assert!(t.events().all(|e| e.provider == 1));
        t.observe(1_000, 7, "open");
        assert_eq!(t.len(), TIMELINE_EVENTS, "an unknown provider is ignored");
    }
}
