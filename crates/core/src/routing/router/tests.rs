use super::*;
use crate::live::inflight::Pressure;
use crate::live::state::ChainCheck;
use prism_config::testing::network;
use prism_config::BreakerPolicy;
use prism_telemetry::snapshot::ProviderHealth;
use std::sync::Arc;

fn statics(n: usize) -> Vec<ProviderStatic> {
    (0..n)
        .map(|_| ProviderStatic {
            weight: 1.0,
            overflow: false,
            region_distance: 0.0,
            quota_rps: None,
            credits: None,
        })
        .collect()
}

fn health(p50s: &[u64], errors: &[(u64, u64)]) -> NetworkHealth {
    NetworkHealth {
        providers: p50s
            .iter()
            .zip(errors)
            .map(|(&p50, &(calls, failures))| {
                let mut h = ProviderHealth::default();
                h.overall.p50_us = p50;
                h.overall.calls = calls;
                h.overall.failures = failures;
                h
            })
            .collect(),
        built_at_ms: 0,
        history: Default::default(),
    }
}

fn ask() -> Ask {
    Ask {
        family: Family::Light,
        strategy: Strategy::Score,
        weights: Weights::default(),
        min_head: 0,
        prefer_deeper: false,
        exclude: 0,
        stalled: 0,
        at_block: None,
        tag: None,
        key: 0,
    }
}

fn live(n: usize) -> Arc<NetworkLive> {
    NetworkLive::new(&network(n), &BreakerPolicy::default(), 0)
}

/// The pool `choose` reads, with nothing in flight.
fn idle<'a>(statics: &'a [ProviderStatic], live: &'a NetworkLive, health: &'a NetworkHealth, now_ms: u64) -> Pool<'a> {
    Pool {
        statics,
        live,
        health,
        pressure: &Pressure::NONE,
        now_ms,
    }
}

fn draw(rotation: usize, dice: f64) -> Draw {
    Draw { rotation, dice }
}

#[test]
fn score_prefers_fast_and_healthy() {
    let l = live(3);
    let h = health(&[40_000, 10_000, 12_000], &[(100, 0), (100, 50), (100, 0)]);
    // p1 is fastest but fails half its calls; p2 wins.
    for r in 0..10 {
        assert_eq!(
            choose(&idle(&statics(3), &l, &h, 1), &ask(), draw(r, 0.5)),
            Choice::Provider(ProviderId::new(2))
        );
    }
}

#[test]
fn near_ties_share_traffic() {
    let l = live(3);
    let h = health(&[10_000, 10_100, 50_000], &[(1, 0), (1, 0), (1, 0)]);
    let picks: Vec<_> = (0..4)
        .map(|r| choose(&idle(&statics(3), &l, &h, 1), &ask(), draw(r, 0.5)))
        .collect();
    assert!(
        picks.contains(&Choice::Provider(ProviderId::new(0))) && picks.contains(&Choice::Provider(ProviderId::new(1)))
    );
    assert!(!picks.contains(&Choice::Provider(ProviderId::new(2))));
}

#[test]
fn open_breakers_drift_and_exclusions_are_skipped() {
    let l = live(3);
    let h = health(&[1, 1, 1], &[(0, 0), (0, 0), (0, 0)]);
    for t in 0..5 {
        l.providers()[0].breaker.on_failure(t);
    }
    l.providers()[1]
        .heads
        .drifted
        .store(true, std::sync::atomic::Ordering::Relaxed);
    for r in 0..5 {
        assert_eq!(
            choose(&idle(&statics(3), &l, &h, 10), &ask(), draw(r, 0.3)),
            Choice::Provider(ProviderId::new(2))
        );
    }
    let a = Ask {
        exclude: 1 << 2,
        ..ask()
    };
    match choose(&idle(&statics(3), &l, &h, 10), &a, draw(0, 0.3)) {
        Choice::AllDown { open, retry_after_ms } => {
            assert_eq!(open, 1);
            assert_eq!(retry_after_ms, 15_000 - 6);
        }
        other => panic!("{other:?}"),
    }
    let a = Ask {
        exclude: 0b111,
        ..ask()
    };
    assert_eq!(
        choose(&idle(&statics(3), &l, &h, 10), &a, draw(0, 0.3)),
        Choice::Exhausted
    );
}

#[test]
fn a_stalled_provider_is_used_only_when_nothing_else_is() {
    let l = live(3);
    let h = health(&[1_000, 1_000, 1_000], &[(10, 0), (10, 0), (10, 0)]);
    let stalled = Ask {
        stalled: 0b011,
        ..ask()
    };
    for r in 0..6 {
        assert_eq!(
            choose(&idle(&statics(3), &l, &h, 1), &stalled, draw(r, 0.5)),
            Choice::Provider(ProviderId::new(2))
        );
    }
    // Everything stalled: still served (by the best of them), never refused.
    let all = Ask {
        stalled: 0b111,
        ..ask()
    };
    assert!(matches!(
        choose(&idle(&statics(3), &l, &h, 1), &all, draw(0, 0.5)),
        Choice::Provider(_)
    ));
}

#[test]
fn score_counts_calls_in_flight_and_their_age() {
    let l = live(3);
    let h = health(&[1_000, 1_000, 1_000], &[(10, 0), (10, 0), (10, 0)]);
    let picks = |p: &Pressure| -> Vec<usize> {
        (0..6)
            .map(|r| {
                match choose(
                    &Pool {
                        statics: &statics(3),
                        live: &l,
                        health: &h,
                        pressure: p,
                        now_ms: 1,
                    },
                    &ask(),
                    Draw { rotation: r, dice: 0.5 },
                ) {
                    Choice::Provider(i) => i.index(),
                    c => panic!("{c:?}"),
                }
            })
            .collect()
    };
    assert_eq!(
        picks(&Pressure::NONE),
        [0, 1, 2, 0, 1, 2],
        "idle equals share in rotation"
    );
    // p1 has a call in flight that is 40 times older than its p50: reads leave it before it answers.
    let mut p = Pressure::NONE;
    p.set(ProviderId::new(0), 1, 40_000.0);
    assert_eq!(picks(&p), [1, 2, 1, 2, 1, 2]);
    // A young call in flight: the idle ones are preferred too (least outstanding), still in rotation.
    p.set(ProviderId::new(0), 1, 500.0);
    assert_eq!(picks(&p), [1, 2, 1, 2, 1, 2]);
    // Everyone busy alike: a tie again.
    for i in 1..3 {
        p.set(ProviderId::new(i), 1, 500.0);
    }
    assert_eq!(picks(&p), [0, 1, 2, 0, 1, 2]);
    // A recent peak far above a provider's p50 counts as its latency now.
    let mut p = Pressure::NONE;
    p.set(ProviderId::new(2), 0, 400_000.0);
    assert_eq!(picks(&p), [0, 1, 0, 1, 0, 1]);
}

#[test]
fn overflow_only_when_nothing_else() {
    let l = live(2);
    let mut s = statics(2);
    s[0].overflow = true;
    let h = health(&[1, 100_000], &[(0, 0), (0, 0)]);
    assert_eq!(
        choose(&idle(&s, &l, &h, 1), &ask(), draw(0, 0.0)),
        Choice::Provider(ProviderId::new(1))
    );
    l.providers()[1].park_until(1_000);
    assert_eq!(
        choose(&idle(&s, &l, &h, 1), &ask(), draw(0, 0.0)),
        Choice::Provider(ProviderId::new(0))
    );
}

#[test]
fn high_water_mark_keeps_deep_providers() {
    let l = live(3);
    l.observe_head(ProviderId::new(0), 100);
    l.observe_head(ProviderId::new(1), 98);
    l.observe_head(ProviderId::new(2), 90);
    let h = health(&[50, 1, 1], &[(0, 0), (0, 0), (0, 0)]);
    let a = Ask { min_head: 99, ..ask() };
    assert_eq!(
        choose(&idle(&statics(3), &l, &h, 1), &a, draw(0, 0.0)),
        Choice::Provider(ProviderId::new(0))
    );
    // Nobody reaches the mark: the deepest is used.
    let a = Ask { min_head: 500, ..ask() };
    assert_eq!(
        choose(&idle(&statics(3), &l, &h, 1), &a, draw(0, 0.0)),
        Choice::Provider(ProviderId::new(0))
    );
    let a = Ask {
        prefer_deeper: true,
        exclude: 1,
        ..ask()
    };
    assert_eq!(
        choose(&idle(&statics(3), &l, &h, 1), &a, draw(0, 0.0)),
        Choice::Provider(ProviderId::new(1))
    );
}

#[test]
fn strategies_use_the_same_candidates() {
    let l = live(3);
    l.providers()[2].set_chain(ChainCheck::Wrong);
    let h = health(&[1, 1000, 1], &[(0, 0), (0, 0), (0, 0)]);
    let rr = Ask {
        strategy: Strategy::RoundRobin,
        ..ask()
    };
    let picks: Vec<_> = (0..4)
        .map(|r| choose(&idle(&statics(3), &l, &h, 1), &rr, draw(r, 0.0)))
        .collect();
    assert_eq!(
        picks,
        vec![
            Choice::Provider(ProviderId::new(0)),
            Choice::Provider(ProviderId::new(1)),
            Choice::Provider(ProviderId::new(0)),
            Choice::Provider(ProviderId::new(1))
        ]
    );
    let random = Ask {
        strategy: Strategy::Random,
        ..ask()
    };
    assert_eq!(
        choose(&idle(&statics(3), &l, &h, 1), &random, draw(0, 0.99)),
        Choice::Provider(ProviderId::new(1))
    );
    let weighted = Ask {
        strategy: Strategy::Weighted,
        ..ask()
    };
    let mut s = statics(3);
    s[0].weight = 3.0;
    let zeros = (0..1000)
        .filter(|k| {
            choose(&idle(&s, &l, &h, 1), &weighted, draw(0, *k as f64 / 1000.0)) == Choice::Provider(ProviderId::new(0))
        })
        .count();
    assert!((700..=800).contains(&zeros), "{zeros}");
}

#[test]
fn a_read_below_a_providers_floor_goes_to_one_that_has_the_block_first() {
    let l = live(3);
    // p0 is the fastest but pruned below 1 000 (declared); p1 learned a floor of 500.
    l.providers()[0].floor.set_configured(1_000);
    for i in 0..3 {
        l.observe_head(ProviderId::new(i), 10_000);
    }
    assert!(l.providers()[1].floor.learn(499, 10_000, 10, 1));
    let h = health(&[1, 5, 50], &[(0, 0), (0, 0), (0, 0)]);
    let at = |b| Ask {
        at_block: Some(b),
        ..ask()
    };
    for r in 0..8 {
        // Below both floors: only the archive node p2, slow as it is.
        assert_eq!(
            choose(&idle(&statics(3), &l, &h, 1), &at(400), draw(r, 0.0)),
            Choice::Provider(ProviderId::new(2))
        );
        // Between them: p1 has it and beats p2.
        assert_eq!(
            choose(&idle(&statics(3), &l, &h, 1), &at(700), draw(r, 0.0)),
            Choice::Provider(ProviderId::new(1))
        );
        // Above every floor: by score.
        assert_eq!(
            choose(&idle(&statics(3), &l, &h, 1), &at(5_000), draw(r, 0.0)),
            Choice::Provider(ProviderId::new(0))
        );
    }
    // An overflow provider that has the block still comes before the pruned primaries.
    let mut st = statics(3);
    st[2].overflow = true;
    assert_eq!(
        choose(&idle(&st, &l, &h, 1), &at(400), draw(0, 0.0)),
        Choice::Provider(ProviderId::new(2))
    );
    // Nobody else usable: the pruned ones are still asked (their answer may say more than nothing).
    let a = Ask {
        exclude: ProviderId::new(2).bit(),
        ..at(400)
    };
    assert_eq!(
        choose(&idle(&statics(3), &l, &h, 1), &a, draw(0, 0.0)),
        Choice::Provider(ProviderId::new(0))
    );
}

#[test]
fn a_tag_read_prefers_providers_at_or_above_the_wanted_tag() {
    let l = live(3);
    for i in 0..3 {
        l.observe_head(ProviderId::new(i), 10_000);
    }
    // p0 is the fastest but 45 blocks behind on `safe`.
    l.providers()[0].tags.set(Finality::Safe, 9_900);
    l.providers()[1].tags.set(Finality::Safe, 9_945);
    l.providers()[2].tags.set(Finality::Safe, 9_945);
    l.recompute_tags();
    assert_eq!(l.tags.agreed(Finality::Safe), 9_945);
    let h = health(&[1, 5, 5], &[(0, 0), (0, 0), (0, 0)]);
    let a = Ask {
        tag: Some((Finality::Safe, l.tags.agreed(Finality::Safe))),
        ..ask()
    };
    let picks: Vec<_> = (0..6)
        .map(|r| choose(&idle(&statics(3), &l, &h, 1), &a, draw(r, 0.0)))
        .collect();
    assert!(!picks.contains(&Choice::Provider(ProviderId::new(0))), "{picks:?}");
    assert!(
        picks.contains(&Choice::Provider(ProviderId::new(1))) && picks.contains(&Choice::Provider(ProviderId::new(2)))
    );
    // `finalized` is its own tag: nobody reports it, so the tag says nothing and the score decides.
    let f = Ask {
        tag: Some((Finality::Finalized, 0)),
        ..ask()
    };
    assert_eq!(
        choose(&idle(&statics(3), &l, &h, 1), &f, draw(0, 0.0)),
        Choice::Provider(ProviderId::new(0))
    );
    // Nobody at the wanted value: the highest.
    let high = Ask {
        tag: Some((Finality::Safe, 9_999)),
        exclude: ProviderId::new(1).bit(),
        ..ask()
    };
    assert_eq!(
        choose(&idle(&statics(3), &l, &h, 1), &high, draw(0, 0.0)),
        Choice::Provider(ProviderId::new(2))
    );
}
