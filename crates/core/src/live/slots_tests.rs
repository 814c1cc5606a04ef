use super::*;
use prism_config::{BreakerPolicy, NetworkKind, Provider, ProviderRole};

/// base-1, base-2, er-1 (two providers: er-1a, er-1b), er-2.
fn magic() -> std::sync::Arc<NetworkLive> {
    let mut n = prism_config::testing::network(5);
    n.kind = NetworkKind::SolanaMagic;
    n.max_slot_drift = 150;
    n.slot_stall_ms = 1_000;
    let roles: [(&str, Option<&str>); 5] = [
        ("base-1", None),
        ("base-2", None),
        ("er-1a", Some("ER1")),
        ("er-1b", Some("ER1")),
        ("er-2", Some("ER2")),
    ];
    n.providers = roles
        .iter()
        .map(|(name, id)| Provider {
            name: name.to_string(),
            role: Some(if id.is_some() {
                ProviderRole::Ephemeral
            } else {
                ProviderRole::Base
            }),
            identity: id.map(str::to_string),
            ..n.providers[0].clone()
        })
        .collect();
    NetworkLive::new(&n, &BreakerPolicy::default(), 2)
}

fn p(i: usize) -> ProviderId {
    ProviderId::new(i)
}

#[test]
fn sides_follow_roles_and_er_identities() {
    let l = magic();
    let sides: Vec<_> = (0..5).map(|i| l.side_of(p(i))).collect();
    assert_eq!(sides, [(0, 3), (0, 3), (1, 3), (1, 3), (2, 3)]);
}

#[test]
fn a_base_provider_far_behind_the_best_base_provider_drifts_and_comes_back() {
    let l = magic();
    l.observe_probed_slot(p(0), 10_000, 1_000);
    l.observe_probed_slot(p(1), 9_800, 1_000);
    // An ER's slots are another clock: far below the base layer's, and never drift.
    l.observe_probed_slot(p(2), 50, 1_000);
    let changes = l.update_slots(1_000);
    assert_eq!(changes, [(p(1), SlotChange::Drifted(true))]);
    assert!(!l.admissible(p(1)) && l.admissible(p(0)) && l.admissible(p(2)));
    l.observe_probed_slot(p(1), 9_900, 1_100);
    assert_eq!(l.update_slots(1_100), [(p(1), SlotChange::Drifted(false))]);
    assert!(l.admissible(p(1)));
}

#[test]
fn a_slot_that_stops_advancing_stalls_its_provider_until_it_moves() {
    let l = magic();
    l.observe_probed_slot(p(4), 500, 1_000);
    assert!(l.update_slots(1_500).is_empty());
    l.observe_probed_slot(p(4), 500, 1_900); // the same slot again
    assert_eq!(l.update_slots(2_000), [(p(4), SlotChange::Stalled(true))]);
    assert!(!l.admissible(p(4)));
    assert_eq!(l.providers()[p(4)].describe(2_000), "stalled");
    l.observe_probed_slot(p(4), 540, 2_100);
    assert_eq!(l.update_slots(2_100), [(p(4), SlotChange::Stalled(false))]);
    assert!(l.admissible(p(4)));
}

#[test]
fn an_answer_cannot_claim_a_slot_its_provider_cannot_be_at() {
    let l = magic();
    l.observe_probed_slot(p(0), 1_000, 10_000);
    // 1 s later: at most 100 slots (10 ms each) plus the drift allowance of 150.
    assert!(l.observe_answer_slot(p(0), 1_240, 11_000));
    assert_eq!(l.slot_of(p(0)).0, 1_240);
    assert!(!l.observe_answer_slot(p(0), 1_000_000_000, 11_000));
    assert_eq!(l.slot_of(p(0)).0, 1_240, "an absurd claim moves nothing");
    // Answers only raise a slot; a probe sets it.
    assert!(l.observe_answer_slot(p(0), 1_100, 11_000));
    assert_eq!(l.slot_of(p(0)).0, 1_240);
}

#[test]
fn evm_networks_have_no_slot_rules() {
    let l = NetworkLive::new(&prism_config::testing::network(2), &BreakerPolicy::default(), 0);
    assert_eq!(l.side_of(p(1)), (0, 1));
    assert!(!l.observe_answer_slot(p(0), 5, 0));
    assert!(l.update_slots(0).is_empty());
}

#[test]
fn every_key_has_its_own_mark_on_every_side() {
    use crate::live::marks::MarkKey;
    let l = magic();
    let lane = |side, commitment| {
        let (lane, lanes) = l.mark_lane(side, commitment);
        (lane, lanes)
    };
    assert_eq!(lane(0, 2), (2, 9));
    assert_eq!(lane(2, 0), (6, 9));
    let on = |key: MarkKey, side, commitment| {
        let (lane, lanes) = lane(side, commitment);
        key.on_side(lane, lanes)
    };
    let (key1_base, key1_er1) = (on(MarkKey::Key(1), 0, 2), on(MarkKey::Key(1), 1, 2));
    l.marks.raise(key1_er1, 77);
    assert_eq!(l.marks.get(key1_er1), 77);
    assert_eq!(l.marks.get(key1_base), 0);
    // The last key on the last side still has a slot of its own.
    let last = on(MarkKey::Key(2), 2, 2);
    l.marks.raise(last, 5);
    assert_eq!(l.marks.get(last), 5);
    assert_eq!(
        l.marks.get(on(MarkKey::Key(2), 2, 1)),
        0,
        "another commitment, another mark"
    );
    assert_eq!(l.marks.get(on(MarkKey::Key(2), 1, 2)), 0);
}

/// Probes provider `i` every `probe_ms` from `from_ms` to `to_ms` (exclusive) on a clock that makes a slot
/// every `slot_ms` from `origin_ms` (slot `first` then) and stops at `frozen_at_ms`; returns when it was
/// first stalled, evaluated as the prober does (after each probe).
fn run_clock(
    l: &NetworkLive,
    i: usize,
    (slot_ms, first, origin_ms): (u64, u64, u64),
    probe_ms: u64,
    (from_ms, to_ms): (u64, u64),
    frozen_at_ms: Option<u64>,
) -> Option<u64> {
    let mut t = from_ms;
    while t < to_ms {
        let made_until = frozen_at_ms.map_or(t, |f| f.min(t));
        let slot = first + made_until.saturating_sub(origin_ms) / slot_ms;
        l.observe_probed_slot(p(i), slot, t);
        let changes = l.update_slots(t);
        if changes.contains(&(p(i), SlotChange::Stalled(true))) {
            return Some(t);
        }
        t += probe_ms;
    }
    None
}

#[test]
fn each_provider_learns_its_own_cadence_from_its_probes() {
    let l = magic();
    // er-2 makes a slot every 50 ms, probed every 2 s; base-1 every 400 ms, probed every 100 ms (most
    // probes see no new slot).
    assert_eq!(run_clock(&l, 4, (50, 10_000, 0), 2_000, (0, 20_000), None), None);
    assert_eq!(run_clock(&l, 0, (400, 1_000, 0), 100, (0, 20_000), None), None);
    let er = l.providers()[p(4)].slots.clock.per_slot_us();
    let base = l.providers()[p(0)].slots.clock.per_slot_us();
    assert!((45_000..=55_000).contains(&er), "50 ms ER: {er} µs per slot");
    assert!((350_000..=450_000).contains(&base), "400 ms base: {base} µs per slot");
}

#[test]
fn a_frozen_clock_is_stalled_within_twenty_of_its_slots_plus_one_probe_interval() {
    // The ER stops at every offset within a probe interval; the base layer likewise. The fixture's
    // slot_stall_ms is 1 000: the 8 s a 400 ms clock would wait is capped there.
    for offset in (0..2_000).step_by(125) {
        let l = magic();
        let frozen = 20_000 + offset;
        let at = run_clock(&l, 4, (50, 10_000, 0), 2_000, (0, 40_000), Some(frozen)).expect("stalled");
        let took = at - frozen;
        assert!(
            took <= 20 * 50 + 2_000,
            "frozen at +{offset} ms: stalled {took} ms later"
        );
        assert!(took >= 20 * 50, "frozen at +{offset} ms: stalled after only {took} ms");
    }
    let mut n = prism_config::testing::network(1);
    n.kind = NetworkKind::SolanaMagic;
    n.slot_stall_ms = 10_000;
    for offset in [0, 700, 1_900] {
        let l = NetworkLive::new(&n, &BreakerPolicy::default(), 2);
        let frozen = 30_000 + offset;
        let at = run_clock(&l, 0, (400, 1_000, 0), 2_000, (0, 60_000), Some(frozen)).expect("stalled");
        let took = at - frozen;
        assert!((8_000..=10_000).contains(&took), "base frozen at +{offset}: {took} ms");
        // Moving again puts it back at its next probe.
        l.observe_probed_slot(p(0), 1_000 + 60_000 / 400, 60_000);
        assert_eq!(l.update_slots(60_000), [(p(0), SlotChange::Stalled(false))]);
        l.observe_probed_slot(p(0), 1_000 + 62_000 / 400, 62_000);
        assert!(l.update_slots(62_000).is_empty());
    }
}

#[test]
fn how_long_a_slot_may_stand_still_follows_the_cadence_within_bounds() {
    let mut n = prism_config::testing::network(3);
    n.kind = NetworkKind::SolanaMagic;
    let l = NetworkLive::new(&n, &BreakerPolicy::default(), 2);
    assert_eq!(l.stall_after_ms(p(0)), 10_000, "cadence unknown: slot_stall_ms");
    run_clock(&l, 0, (400, 1_000, 0), 2_000, (0, 12_000), None);
    run_clock(&l, 1, (5, 1_000, 0), 2_000, (0, 12_000), None);
    run_clock(&l, 2, (1_000, 1_000, 0), 2_000, (0, 12_000), None);
    assert_eq!(l.stall_after_ms(p(0)), 8_000, "20 slots of 400 ms");
    assert_eq!(
        l.stall_after_ms(p(1)),
        MIN_STALL_MS,
        "a 5 ms clock: never under the floor"
    );
    assert_eq!(l.stall_after_ms(p(2)), 10_000, "a 1 s clock: never over slot_stall_ms");
    n.slot_stall_slots = 0;
    let l = NetworkLive::new(&n, &BreakerPolicy::default(), 2);
    run_clock(&l, 0, (400, 1_000, 0), 2_000, (0, 12_000), None);
    assert_eq!(l.stall_after_ms(p(0)), 10_000, "slot_stall_slots = 0: the fixed wait");
}

#[test]
fn one_odd_interval_does_not_move_the_cadence() {
    let l = magic();
    run_clock(&l, 4, (50, 10_000, 0), 2_000, (0, 16_000), None);
    // A node catching up: 4 000 slots in one interval.
    l.observe_probed_slot(p(4), 10_000 + 16_000 / 50 + 4_000, 16_000);
    l.update_slots(16_000);
    let per = l.providers()[p(4)].slots.clock.per_slot_us();
    assert!((45_000..=55_000).contains(&per), "{per}");
}

#[test]
fn a_slot_between_probes_is_where_the_cadence_took_it() {
    let l = magic();
    run_clock(&l, 0, (400, 1_000, 0), 2_000, (0, 10_000), None);
    let (slot, at) = l.slot_of(p(0));
    assert_eq!(slot, 1_000 + 8_000 / 400);
    assert_eq!(l.slot_now(p(0), at), slot);
    assert_eq!(
        l.slot_now(p(0), at + 1_200),
        slot + 4,
        "three slots of 400 ms later, and a quarter more"
    );
    assert_eq!(l.slot_now(p(0), at + 100), slot + 1, "rounded up");
    assert_eq!(
        l.slot_now(p(0), at + 3_600_000),
        slot + 20,
        "never past slot_stall_slots"
    );
    // Unknown cadence: what was last seen.
    l.observe_probed_slot(p(1), 990, 10_000);
    assert_eq!(l.slot_now(p(1), 20_000), 990);
}

#[test]
fn a_provider_that_says_it_is_behind_is_left_out_until_its_next_probe() {
    let l = magic();
    l.observe_probed_slot(p(0), 10_000, 1_000);
    l.observe_probed_slot(p(1), 10_000, 1_000);
    assert!(l.update_slots(1_000).is_empty());
    let said = br#"{"code":-32005,"message":"Node is behind by 42 slots","data":{"numSlotsBehind":42}}"#;
    let told = l.told_behind(p(1), said, 1_100).expect("a behind error");
    assert_eq!((told.behind, told.newly), (42, true));
    assert!(!l.admissible(p(1)), "out at once, though 42 < max_slot_drift");
    assert_eq!(l.slot_of(p(1)).0, 10_000 - 42);
    assert_eq!(l.told_behind(p(1), said, 1_200).map(|t| t.newly), Some(false));
    // Other providers' probes do not bring it back; its own does.
    l.observe_probed_slot(p(0), 10_001, 1_500);
    l.update_slots(1_500);
    assert!(!l.admissible(p(1)));
    l.observe_probed_slot(p(1), 10_001, 1_600);
    assert_eq!(l.update_slots(1_600), [(p(1), SlotChange::Drifted(false))]);
    assert!(l.admissible(p(1)));
    // The number in the message serves when data has none; other errors are not "behind".
    let text = br#"{"code":-32005,"message":"Node is behind by 7 slots"}"#;
    assert_eq!(l.told_behind(p(1), text, 1_700).map(|t| t.behind), Some(7));
    assert_eq!(
        slots_behind(br#"{"code":-32005,"message":"Node is unhealthy","data":{"numSlotsBehind":null}}"#),
        None
    );
    assert_eq!(slots_behind(br#"{"code":-32016,"message":"behind by 3"}"#), None);
    // The only provider of its side is not left out on its word: nobody else could answer.
    assert_eq!(l.told_behind(p(4), said, 1_800), None);
    assert!(l.admissible(p(4)));
}

#[test]
fn the_interval_a_clock_stopped_in_does_not_slow_its_cadence_but_a_real_change_does() {
    let l = magic();
    // Two samples of 50 ms, then the clock stops a quarter into the next interval: that interval's 10
    // slots in 2 s (200 ms per slot) are held back, and the clock is stalled on its one-second wait.
    let at = run_clock(&l, 4, (50, 10_000, 0), 2_000, (0, 20_000), Some(4_500)).expect("stalled");
    assert_eq!(l.providers()[p(4)].slots.clock.per_slot_us(), 50_000);
    assert_eq!(
        at, 6_000,
        "stalled at the first probe after it stopped: 1.5 s without a slot"
    );
    // A clock that really changed pace (now 200 ms) looks stopped for a few intervals (each shows a quarter
    // of the slots it should), then its cadence is believed and it stays in.
    let l = magic();
    run_clock(&l, 4, (50, 10_000, 0), 2_000, (0, 10_000), None);
    let mut t = 10_000;
    while l.providers()[p(4)].slots.clock.per_slot_us() != 200_000 {
        assert!(t < 30_000, "the new pace was never believed");
        l.observe_probed_slot(p(4), 10_200 + (t - 10_000) / 200, t);
        l.update_slots(t);
        t += 2_000;
    }
    assert_eq!(
        run_clock(&l, 4, (200, 10_200, 10_000), 2_000, (t, t + 20_000), None),
        None
    );
}
