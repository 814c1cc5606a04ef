use super::*;
use crate::config::{BreakerPolicy, NetworkKind, Provider, ProviderRole};

/// base-1, base-2, er-1 (two providers: er-1a, er-1b), er-2.
fn magic() -> std::sync::Arc<NetworkLive> {
    let mut n = crate::config::testing::network(5);
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
    let l = NetworkLive::new(&crate::config::testing::network(2), &BreakerPolicy::default(), 0);
    assert_eq!(l.side_of(p(1)), (0, 1));
    assert!(!l.observe_answer_slot(p(0), 5, 0));
    assert!(l.update_slots(0).is_empty());
}

#[test]
fn every_key_has_its_own_mark_on_every_side() {
    use crate::core::marks::MarkKey;
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
