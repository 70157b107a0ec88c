//! Trouble points: probing near where the origin struggled, and forgetting a point once the rate
//! stayed past it or the origin's capacity came back.

use super::*;

/// A controller that met trouble at 100/s: a p95 of 300 ms, then 420 ms (rising near the
/// target, no count of what was sent). Returns it, the trouble point (95% of the rate whose load
/// the second reading measured) and the rate after the trim.
fn trimmed_near_100() -> (Controller, f64, f64) {
    let mut controller = Controller::default();
    let first = controller.step(
        &SETTINGS,
        100.0,
        Some(&reading(1_000, healthy(100, 300.0))),
        1_000,
    );
    // The reading of 2 s measured the rate set at 1 s; the origin struggled just under it.
    let trouble = 0.95 * first.rate;
    let trim = controller.step(
        &SETTINGS,
        first.rate,
        Some(&reading(2_000, healthy(100, 420.0))),
        2_000,
    );
    assert_eq!(trim.reason, AutoRateReason::LatencyRising);
    (controller, trouble, trim.rate)
}

#[test]
fn a_trouble_point_is_forgotten_only_after_the_rate_stays_past_it() {
    let (mut controller, trouble, mut rate) = trimmed_near_100();
    // Healthy from then on: it probes (2% a second) up to and past 110% of the trouble point,
    // and only after 3 s there rises at 8% again.
    let mut steps = Vec::new();
    for second in 3..40_u64 {
        let now_ms = second * 1_000;
        // The p95 the origin had before its trouble: not faster, so only time forgets it.
        let healthy = Some(reading(now_ms, healthy(100, 300.0)));
        let step = controller.step(&SETTINGS, rate, healthy.as_ref(), now_ms);
        steps.push((rate, step.reason));
        rate = step.rate;
    }
    let fast_again = steps
        .iter()
        .position(|(_, reason)| *reason == AutoRateReason::Headroom)
        .expect("rises fast again");
    let probing_past = steps[..fast_again]
        .iter()
        .filter(|(rate, reason)| *rate > trouble * 1.1 && *reason == AutoRateReason::Probing)
        .count();
    assert_eq!(probing_past, 3, "{steps:?}");
    assert!(steps[..fast_again]
        .iter()
        .all(|(_, reason)| matches!(reason, AutoRateReason::Probing | AutoRateReason::Settling)));
}

#[test]
fn a_trouble_point_passed_while_a_queue_forms_is_not_forgotten() {
    let (mut controller, trouble, mut rate) = trimmed_near_100();
    // Past 110% of the point every other reading's p95 is a bucket and more over its floor
    // (250 ms on 200, of 100 answers): a queue forming at the origin's true capacity, just above
    // the point. The rate creeps past it and never rises fast.
    let mut step_at = |second: u64, rate: f64, queueing: bool| {
        let now_ms = second * 1_000;
        let p95_ms = if queueing { 250.0 } else { 200.0 };
        let signals = Some(reading(now_ms, healthy(100, p95_ms)));
        controller.step(&SETTINGS, rate, signals.as_ref(), now_ms)
    };
    for second in 3..30_u64 {
        let queueing = rate > trouble * 1.1 && second % 2 == 1;
        let step = step_at(second, rate, queueing);
        assert!(
            matches!(
                step.reason,
                AutoRateReason::Probing | AutoRateReason::Settling
            ),
            "{second} s at {rate}: {step:?}"
        );
        rate = step.rate;
    }
    assert!(rate > trouble * 1.1, "crept past it: {rate}");
    // Readings with no queue for 3 s forget it.
    let reasons: Vec<_> = (30..34_u64)
        .map(|second| {
            let step = step_at(second, rate, false);
            rate = step.rate;
            step.reason
        })
        .collect();
    assert_eq!(
        reasons.last(),
        Some(&AutoRateReason::Headroom),
        "{reasons:?}"
    );
}

/// A controller trimmed near 100/s ([`trimmed_near_100`]), then probing under the point with a
/// steady p95 of 300 ms for 10 s; returns it and the rate it reached.
fn probing_under_a_trouble_point() -> (Controller, f64) {
    let (mut controller, _, mut rate) = trimmed_near_100();
    for second in 3..13_u64 {
        let now_ms = second * 1_000;
        let step = controller.step(
            &SETTINGS,
            rate,
            Some(&reading(now_ms, healthy(100, 300.0))),
            now_ms,
        );
        assert!(
            matches!(
                step.reason,
                AutoRateReason::Probing | AutoRateReason::Settling
            ),
            "{step:?} at {second} s"
        );
        rate = step.rate;
    }
    (controller, rate)
}

#[test]
fn a_trouble_point_is_forgotten_at_once_when_the_same_load_is_answered_much_faster() {
    // The origin's capacity came back: the load it struggled with is answered in half the time.
    let (mut controller, rate) = probing_under_a_trouble_point();
    let faster = Reading {
        at_ms: 13_000,
        signals: healthy(100, 150.0),
    };
    let step = controller.step(&SETTINGS, rate, Some(&faster), 13_000);
    assert_eq!(step.reason, AutoRateReason::Headroom, "{step:?}");
    assert!(step.rate >= rate * 1.07, "{rate} → {}", step.rate);

    // A p95 a little lower (one latency bucket) is noise at the same capacity: still probing.
    let (mut controller, rate) = probing_under_a_trouble_point();
    let a_little = Reading {
        at_ms: 13_000,
        signals: healthy(100, 250.0),
    };
    let step = controller.step(&SETTINGS, rate, Some(&a_little), 13_000);
    assert_eq!(step.reason, AutoRateReason::Probing, "{step:?}");
}

#[test]
fn a_rate_held_near_the_target_measures_the_origin_for_when_its_capacity_comes_back() {
    // After the trim the origin answers near the target (the rate holds there), then its
    // capacity comes back and the same load is answered in half the time: the point goes.
    let (mut controller, _, mut rate) = trimmed_near_100();
    let held = rate;
    for second in 3..10_u64 {
        let now_ms = second * 1_000;
        let near_target = Reading {
            at_ms: now_ms,
            signals: healthy(100, 410.0),
        };
        let step = controller.step(&SETTINGS, rate, Some(&near_target), now_ms);
        assert!(
            matches!(
                step.reason,
                AutoRateReason::AtTarget | AutoRateReason::Settling
            ),
            "{step:?} at {second} s"
        );
        rate = step.rate;
    }
    assert_eq!(rate, held);
    let faster = Reading {
        at_ms: 10_000,
        signals: healthy(100, 200.0),
    };
    let step = controller.step(&SETTINGS, rate, Some(&faster), 10_000);
    assert_eq!(step.reason, AutoRateReason::Headroom, "{step:?}");
    assert!(controller.trouble_points().is_empty(), "{controller:?}");
}
