use super::*;

mod fluid;

const SETTINGS: AutoRate = AutoRate {
    min: 10.0,
    max: 400.0,
    target_p95_ms: 500,
    max_error_rate: 0.01,
    health_url: None,
};

fn healthy(requests: u64, p95_ms: f64) -> OriginSignals {
    OriginSignals {
        requests,
        p50_ms: p95_ms / 2.0,
        p95_ms,
        error_rate: 0.0,
        in_flight: 1,
        sent: None,
    }
}

/// Steps a fresh controller once a second from 1 s on, starting at `rate` and following its own
/// decisions, on readings of `requests` answers with each of `p95s` in turn: its decisions.
fn decisions(rate: f64, requests: u64, p95s: &[f64]) -> Vec<Decision> {
    let mut controller = Controller::default();
    let mut rate = rate;
    let mut steps = Vec::new();
    for (second, p95_ms) in (1..).zip(p95s) {
        let now_ms = second * 1_000;
        let reading = Reading {
            at_ms: now_ms,
            signals: healthy(requests, *p95_ms),
        };
        let step = controller.step(&SETTINGS, rate, Some(&reading), now_ms);
        steps.push(step);
        rate = step.rate;
    }
    steps
}

#[test]
fn never_rises_on_stale_or_missing_signals_and_falls_to_min_once_lost() {
    let mut controller = Controller::default();
    let fresh = Reading {
        at_ms: 1_000,
        signals: healthy(100, 100.0),
    };
    let risen = controller.step(&SETTINGS, 100.0, Some(&fresh), 1_000).rate;
    assert!(risen > 100.0);
    let mut rate = risen;
    for now_ms in (4_100..11_000).step_by(1_000) {
        let stale = controller.step(&SETTINGS, rate, Some(&fresh), now_ms);
        assert!(stale.rate <= rate, "rose on stale signals at {now_ms}");
        assert_eq!(stale.reason, AutoRateReason::SignalsStale);
        rate = stale.rate;
    }
    let lost = controller.step(&SETTINGS, rate, None, 11_000);
    assert_eq!(
        (lost.rate, lost.reason),
        (SETTINGS.min, AutoRateReason::SignalsLost)
    );
    // A controller that never heard from the origin holds, then falls; it never rises.
    let mut fresh_start = Controller::default();
    for now_ms in (0..10_000).step_by(1_000) {
        let decision = fresh_start.step(&SETTINGS, 175.0, None, now_ms);
        assert_eq!(
            (decision.rate, decision.reason),
            (175.0, AutoRateReason::SignalsStale)
        );
    }
    assert_eq!(
        fresh_start.step(&SETTINGS, 175.0, None, 10_000).rate,
        SETTINGS.min
    );
}

#[test]
fn holds_on_too_few_requests_and_stays_within_min_and_max() {
    let mut controller = Controller::default();
    let reading = Reading {
        at_ms: 1_000,
        signals: healthy(MIN_REQUESTS - 1, 50.0),
    };
    let decision = controller.step(&SETTINGS, 50.0, Some(&reading), 1_000);
    assert_eq!(
        (decision.rate, decision.reason),
        (50.0, AutoRateReason::LittleTraffic)
    );
    let below = controller.step(&SETTINGS, 1.0, Some(&reading), 2_000);
    assert_eq!(below.rate, SETTINGS.min);
    let above = controller.step(&SETTINGS, 1e4, Some(&reading), 3_000);
    assert_eq!(above.rate, SETTINGS.max);
}

#[test]
fn cuts_at_once_on_errors_and_on_latency_in_proportion() {
    let mut controller = Controller::default();
    let errors = OriginSignals {
        error_rate: 0.05,
        ..healthy(500, 100.0)
    };
    let decision = controller.step(
        &SETTINGS,
        200.0,
        Some(&Reading {
            at_ms: 0,
            signals: errors,
        }),
        0,
    );
    assert_eq!(decision.reason, AutoRateReason::ErrorsHigh);
    assert!((decision.rate - 140.0).abs() < 1e-9);
    let mut controller = Controller::default();
    let slow = healthy(500, 800.0);
    let decision = controller.step(
        &SETTINGS,
        200.0,
        Some(&Reading {
            at_ms: 0,
            signals: slow,
        }),
        0,
    );
    assert_eq!(decision.reason, AutoRateReason::LatencyHigh);
    assert!((decision.rate - 125.0).abs() < 1e-9, "{}", decision.rate);
}

#[test]
fn an_overloaded_origin_is_cut_under_its_measured_capacity_and_left_to_drain() {
    let mut controller = Controller::default();
    // 200/s sent, 100/s answered: the origin takes about half.
    let overloaded = OriginSignals {
        sent: Some(200),
        ..healthy(100, 700.0)
    };
    let reading = |at_ms, signals| Reading { at_ms, signals };
    let cut = controller.step(&SETTINGS, 200.0, Some(&reading(1_000, overloaded)), 1_000);
    assert_eq!(cut.reason, AutoRateReason::LatencyHigh);
    // Under the capacity by the overshoot (× 500 ÷ 700) or by the share it took of what it
    // was sent (× 0.5), the deeper, so the load on its way drains too; but one step never cuts
    // below × 0.3 of the rate: 60/s.
    assert!((cut.rate - 60.0).abs() < 1e-9, "{cut:?}");
    // Past the settling time the latency is still over the target, but the origin answers more
    // than it is sent and the p95 falls: its backlog drains, so the rate holds.
    let draining = OriginSignals {
        sent: Some(80),
        ..healthy(100, 600.0)
    };
    let held = controller.step(&SETTINGS, 80.0, Some(&reading(4_000, draining)), 4_000);
    assert_eq!((held.rate, held.reason), (80.0, AutoRateReason::Settling));
    // Once healthy it rises slowly near the measured capacity (the trouble point).
    let near = controller.step(
        &SETTINGS,
        92.0,
        Some(&reading(5_000, healthy(90, 100.0))),
        5_000,
    );
    assert_eq!(near.reason, AutoRateReason::Probing);
    // Nearer the target the measured capacity sets the cut: at most 80% of 150/s, and 75% (the
    // share it took).
    let mut controller = Controller::default();
    let busy = OriginSignals {
        sent: Some(200),
        ..healthy(150, 550.0)
    };
    let cut = controller.step(&SETTINGS, 200.0, Some(&reading(1_000, busy)), 1_000);
    assert!((cut.rate - 112.5).abs() < 1e-9, "{cut:?}");
    // Just past the capacity (90% taken) the 80% stands.
    let mut controller = Controller::default();
    let just_past = OriginSignals {
        sent: Some(200),
        ..healthy(180, 550.0)
    };
    let cut = controller.step(&SETTINGS, 200.0, Some(&reading(1_000, just_past)), 1_000);
    assert!((cut.rate - 144.0).abs() < 1e-9, "{cut:?}");
    // A single step never cuts below × 0.3, whatever the share says.
    let mut controller = Controller::default();
    let swamped = OriginSignals {
        sent: Some(1_000),
        ..healthy(20, 5_000.0)
    };
    let deepest = controller.step(&SETTINGS, 200.0, Some(&reading(1_000, swamped)), 1_000);
    assert!((deepest.rate - 60.0).abs() < 1e-9, "{deepest:?}");
}

#[test]
fn capacity_is_read_against_the_rate_that_offered_the_load() {
    let mut controller = Controller::default();
    let reading = |at_ms, signals| Reading { at_ms, signals };
    let first = controller.step(
        &SETTINGS,
        100.0,
        Some(&reading(1_000, healthy(100, 100.0))),
        1_000,
    );
    let offered = controller
        .step(
            &SETTINGS,
            first.rate,
            Some(&reading(2_000, healthy(100, 100.0))),
            2_000,
        )
        .rate;
    // At 3 s an operator has set 200/s, but the reading of 3 s measured the load offered at the
    // loop's rate of 2 s: 100 sent, 80 through.
    let overloaded = OriginSignals {
        sent: Some(100),
        ..healthy(80, 625.0)
    };
    let cut = controller.step(&SETTINGS, 200.0, Some(&reading(3_000, overloaded)), 3_000);
    // 80% of the offered rate is its capacity, and the cut goes to 80% of that (the rate now,
    // 200/s, would say 128/s).
    assert!(
        (cut.rate - 0.8 * 0.8 * offered).abs() < 1e-6,
        "{cut:?} from {offered}"
    );
}

#[test]
fn readings_of_load_offered_before_a_cut_do_not_cut_again() {
    let mut controller = Controller::default();
    let reading = |at_ms, signals| Reading { at_ms, signals };
    let slow = OriginSignals {
        sent: Some(150),
        ..healthy(100, 1_500.0)
    };
    let cut = controller.step(&SETTINGS, 150.0, Some(&reading(1_000, slow)), 1_000);
    assert_eq!(cut.reason, AutoRateReason::LatencyHigh);
    // 2.5 s later the settling time is over, but the newest reading (taken at 2.9 s) still
    // measures load offered before the cut took effect: hold.
    let later = controller.step(&SETTINGS, cut.rate, Some(&reading(2_900, slow)), 3_500);
    assert_eq!(
        (later.rate, later.reason),
        (cut.rate, AutoRateReason::Settling)
    );
    // A reading of a whole second after it, still over the target with the origin not keeping
    // up, cuts again.
    let after = controller.step(&SETTINGS, cut.rate, Some(&reading(5_000, slow)), 5_500);
    assert_eq!(after.reason, AutoRateReason::LatencyHigh);
}

#[test]
fn a_climbing_p95_trims_under_the_offered_rate_before_the_target_is_crossed() {
    let mut controller = Controller::default();
    let reading = |at_ms, signals| Reading { at_ms, signals };
    // 150/s in force; the p95 climbs 210 → 250 → 300 ms (60% of the target): the rate is just
    // past the capacity.
    let mut rate = 150.0;
    let mut steps = Vec::new();
    for (second, p95_ms) in [(1, 210.0), (2, 250.0), (3, 300.0)] {
        let now_ms = second * 1_000;
        let step = controller.step(
            &SETTINGS,
            rate,
            Some(&reading(now_ms, healthy(150, p95_ms))),
            now_ms,
        );
        steps.push(step);
        rate = step.rate;
    }
    let trim = steps[2];
    assert_eq!(trim.reason, AutoRateReason::LatencyRising, "{steps:?}");
    // The reading of 3 s measured the load offered at 2 s (the rate the second step set).
    let offered = steps[1].rate;
    assert!((trim.rate - 0.9 * offered).abs() < 1e-6, "{steps:?}");
    // Past the settling time, healthy again: it probes (the trouble point is 95% of that rate).
    let step = controller.step(
        &SETTINGS,
        trim.rate,
        Some(&reading(7_000, healthy(150, 200.0))),
        7_000,
    );
    assert_eq!(step.reason, AutoRateReason::Probing);
}

/// A controller that met trouble at 100/s: a p95 of 300 ms, then 420 ms (rising near the
/// target, no count of what was sent). Returns it, the trouble point (95% of the rate whose load
/// the second reading measured) and the rate after the trim.
fn trimmed_near_100() -> (Controller, f64, f64) {
    let mut controller = Controller::default();
    let reading = |at_ms, signals| Reading { at_ms, signals };
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
    let reading = |at_ms, signals| Reading { at_ms, signals };
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

/// A controller trimmed near 100/s ([`trimmed_near_100`]), then probing under the point with a
/// steady p95 of 300 ms for 10 s; returns it and the rate it reached.
fn probing_under_a_trouble_point() -> (Controller, f64) {
    let (mut controller, _, mut rate) = trimmed_near_100();
    let reading = |at_ms, signals| Reading { at_ms, signals };
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

#[test]
fn an_origin_slow_at_any_load_is_cut_though_it_answers_what_it_is_sent() {
    let mut controller = Controller::default();
    let reading = |at_ms, signals| Reading { at_ms, signals };
    // 100 sent, 100 answered, all slow: no backlog to wait for, so every few seconds it cuts.
    let slow = OriginSignals {
        sent: Some(100),
        ..healthy(100, 800.0)
    };
    let mut rate = 100.0;
    let mut cuts = 0;
    for second in 1..=30_u64 {
        let now_ms = second * 1_000;
        let step = controller.step(&SETTINGS, rate, Some(&reading(now_ms, slow)), now_ms);
        cuts += usize::from(step.rate < rate);
        rate = step.rate;
    }
    assert!(
        cuts >= 5 && rate <= SETTINGS.min * 1.5,
        "{cuts} cuts, at {rate}"
    );
}

#[test]
fn a_burst_lifting_one_second_from_a_low_base_is_not_a_backlog() {
    let mut controller = Controller::default();
    let reading = |at_ms, signals| Reading { at_ms, signals };
    let mut rate = 100.0;
    // 150 ms, 180 ms, then one second at 440 ms (88% of the target) and back.
    for (second, p95_ms) in [(1, 150.0), (2, 180.0), (3, 440.0), (4, 170.0)] {
        let now_ms = second * 1_000;
        let step = controller.step(
            &SETTINGS,
            rate,
            Some(&reading(now_ms, healthy(100, p95_ms))),
            now_ms,
        );
        assert_ne!(step.reason, AutoRateReason::LatencyRising, "{second} s");
        rate = step.rate;
    }
    // Two readings up from an elevated base are.
    let steps = decisions(100.0, 100, &[210.0, 250.0, 300.0]);
    assert_eq!(steps[2].reason, AutoRateReason::LatencyRising, "{steps:?}");
}

#[test]
fn a_burst_over_the_target_is_read_by_the_share_of_the_last_seconds() {
    let mut controller = Controller::default();
    let reading = |at_ms, signals| Reading { at_ms, signals };
    let counted = |sent: u64, through: u64, p95_ms| OriginSignals {
        sent: Some(sent),
        ..healthy(through, p95_ms)
    };
    let mut rate = 120.0;
    for second in 1..=2 {
        let now_ms = second * 1_000;
        rate = controller
            .step(
                &SETTINGS,
                rate,
                Some(&reading(now_ms, counted(120, 120, 200.0))),
                now_ms,
            )
            .rate;
    }
    // Shoppers held up for a second reach the origin together: 200 sent, 124 through, the p95
    // over the target. Over the three seconds 364 of 440 got through (83%), not 62%.
    let burst = controller.step(
        &SETTINGS,
        rate,
        Some(&reading(3_000, counted(200, 124, 600.0))),
        3_000,
    );
    assert_eq!(burst.reason, AutoRateReason::LatencyHigh);
    let offered = controller.offered(3_000, rate);
    let drain = 500.0 / 600.0_f64;
    let expected = (rate * drain).min(offered * 364.0 / 440.0 * drain.min(0.8));
    assert!(
        (burst.rate - expected).abs() < 1e-6,
        "{burst:?}, expected {expected}"
    );
}

#[test]
fn a_p95_of_a_few_dozen_answers_trims_only_when_it_climbs_over_two_readings() {
    let reasons = |requests, p95s: &[f64]| -> Vec<AutoRateReason> {
        let steps = decisions(20.0, requests, p95s);
        steps.iter().map(|step| step.reason).collect()
    };
    // Half the capacity, 35 answers a reading: the p95 is the second slowest, and one clump of
    // checkouts lifts it from 220 to 370 ms (74% of the target) and back.
    let jump = reasons(35, &[220.0, 370.0, 185.0]);
    assert!(!jump.contains(&AutoRateReason::LatencyRising), "{jump:?}");
    // The same jump on enough answers is a backlog forming.
    let jump = reasons(60, &[220.0, 370.0, 185.0]);
    assert_eq!(jump[1], AutoRateReason::LatencyRising, "{jump:?}");
    // A climb over two readings is, even on a few dozen answers.
    let climb = reasons(35, &[220.0, 265.0, 370.0]);
    assert_eq!(climb[2], AutoRateReason::LatencyRising, "{climb:?}");
}

#[test]
fn an_origin_answering_under_nine_tenths_of_what_it_is_sent_holds_the_rate_under_the_targets() {
    let reading = |at_ms, signals| Reading { at_ms, signals };
    let counted = |sent: u64, through: u64| OriginSignals {
        sent: Some(sent),
        ..healthy(through, 200.0)
    };
    // p95 200 ms (40% of the target) but 100 of 120 through a second, three seconds running:
    // the origin is at its capacity before its latency shows it.
    let mut controller = Controller::default();
    let mut steps = Vec::new();
    for second in 1..=3 {
        let now_ms = second * 1_000;
        steps.push(controller.step(
            &SETTINGS,
            120.0,
            Some(&reading(now_ms, counted(120, 100))),
            now_ms,
        ));
    }
    assert!(
        steps
            .iter()
            .all(|step| step.reason == AutoRateReason::AtCapacity && step.rate == 120.0),
        "{steps:?}"
    );
    // 114 of 120 (95%) is within what three seconds' counts differ by: it rises.
    let mut controller = Controller::default();
    let step = controller.step(
        &SETTINGS,
        120.0,
        Some(&reading(1_000, counted(120, 114))),
        1_000,
    );
    assert_eq!(step.reason, AutoRateReason::Headroom, "{step:?}");
    assert!(step.rate > 120.0);
}

#[test]
fn a_p95_queueing_over_its_floor_near_the_target_creeps_but_a_slow_origins_floor_does_not() {
    // Answered in 184 ms for three seconds, then 370 ms (74% of the target, twice the floor) on
    // 35 answers: a queue forming, which one such reading cannot tell from a clump.
    let steps = decisions(30.0, 35, &[184.0, 184.0, 184.0, 370.0]);
    let creep = steps[3];
    assert_eq!(creep.reason, AutoRateReason::Probing, "{steps:?}");
    assert!(creep.rate <= steps[2].rate * (1.0 + PROBING_RISE_PER_SEC) + 1e-9);
    // An origin answering 350–370 ms at any load (its floor) has no queue: it rises fast.
    let steps = decisions(30.0, 35, &[350.0, 370.0, 350.0, 370.0]);
    assert!(
        steps
            .iter()
            .all(|step| step.reason == AutoRateReason::Headroom),
        "{steps:?}"
    );
    // The floor is of the last 10 s: 11 s after the fast answers, 370 ms is the origin's pace.
    let reading = |at_ms, signals| Reading { at_ms, signals };
    let mut controller = Controller::default();
    controller.step(
        &SETTINGS,
        30.0,
        Some(&reading(1_000, healthy(35, 184.0))),
        1_000,
    );
    let later = controller.step(
        &SETTINGS,
        30.0,
        Some(&reading(12_000, healthy(35, 370.0))),
        12_000,
    );
    assert_eq!(later.reason, AutoRateReason::Headroom, "{later:?}");
}

#[test]
fn after_a_cut_under_a_measured_capacity_a_backlog_drains_without_a_second_cut() {
    let reading = |at_ms, signals| Reading { at_ms, signals };
    let counted = |sent: u64, through: u64, p95_ms| OriginSignals {
        sent: Some(sent),
        ..healthy(through, p95_ms)
    };
    // 50/s offered, 42 through and the p95 over the target: the capacity is measured (42/s)
    // and the cut goes under it. Three seconds later the answers still coming out of the backlog
    // are slower (1,050 ms), and the origin answers `through` of 35 sent.
    let after_cut = |through| {
        let mut controller = Controller::default();
        let mut rate = 50.0;
        for second in 1..=2 {
            let now_ms = second * 1_000;
            let signals = counted(50, 50, 200.0);
            rate = controller
                .step(&SETTINGS, rate, Some(&reading(now_ms, signals)), now_ms)
                .rate;
        }
        let cut = controller.step(
            &SETTINGS,
            50.0,
            Some(&reading(3_000, counted(50, 42, 525.0))),
            3_000,
        );
        assert_eq!(cut.reason, AutoRateReason::LatencyHigh);
        let later = controller.step(
            &SETTINGS,
            cut.rate,
            Some(&reading(6_000, counted(35, through, 1_050.0))),
            6_000,
        );
        (cut, later)
    };
    // At least what it is sent: the backlog drains as the cut planned.
    let (cut, later) = after_cut(36);
    assert!(cut.rate < 42.0, "{cut:?}");
    assert_eq!(
        (later.reason, later.rate),
        (AutoRateReason::Settling, cut.rate)
    );
    // Less than it is sent: its capacity fell again, and the rate is cut.
    let (cut, later) = after_cut(30);
    assert_eq!(later.reason, AutoRateReason::LatencyHigh, "{later:?}");
    assert!(later.rate < cut.rate);
}
