//! Under the targets: when a rising p95 trims the rate (a backlog forming, not a clump of few
//! answers), and when the rate rises slowly or holds (queueing, at capacity).

use super::*;

#[test]
fn a_climbing_p95_trims_under_the_offered_rate_before_the_target_is_crossed() {
    let mut controller = Controller::default();
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

#[test]
fn a_burst_lifting_one_second_from_a_low_base_is_not_a_backlog() {
    let mut controller = Controller::default();
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
    // p95 200 ms (40% of the target) but 100 of 120 through a second, three seconds running:
    // the origin is at its capacity before its latency shows it.
    let mut controller = Controller::default();
    let mut steps = Vec::new();
    for second in 1..=3 {
        let now_ms = second * 1_000;
        steps.push(controller.step(
            &SETTINGS,
            120.0,
            Some(&reading(now_ms, counted(120, 100, 200.0))),
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
    let step = first_step(120.0, counted(120, 114, 200.0));
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
fn a_p95_up_a_bucket_with_no_queue_in_flight_is_no_backlog() {
    // An origin whose every answer takes about 370 ms (half its capacity, service time doubled):
    // its p50 and p95 fall in one bucket, and the next reading's p95 one bucket up.
    let even = |p95_ms: f64, in_flight: u64| OriginSignals {
        requests: 65,
        p50_ms: 370.0,
        p95_ms,
        error_rate: 0.0,
        in_flight,
        sent: Some(65),
        window_secs: None,
    };
    let decide = |in_flight: u64| {
        let mut controller = Controller::default();
        let first = controller.step(
            &SETTINGS,
            65.0,
            Some(&reading(1_000, even(370.0, 24))),
            1_000,
        );
        let up = even(440.0, in_flight);
        controller.step(&SETTINGS, first.rate, Some(&reading(2_000, up)), 2_000)
    };
    // 24 in flight with 65 answered a second wait 369 ms, no longer than the answers took: held
    // near the target, not trimmed.
    assert_eq!(decide(24).reason, AutoRateReason::AtTarget);
    // 28 wait 431 ms, within a bucket of the answers' p50: still no queue.
    assert_eq!(decide(28).reason, AutoRateReason::AtTarget);
    // 32 wait 492 ms, more than a bucket longer: a queue is forming, and the rise trims.
    assert_eq!(decide(32).reason, AutoRateReason::LatencyRising);
}

#[test]
fn a_reading_judged_again_does_not_hide_a_climb() {
    let mut controller = Controller::default();
    let read = |at_ms: u64, p95_ms: f64| reading(at_ms, healthy(150, p95_ms));
    let mut rate = 150.0;
    for (now_ms, seen) in [(1_000, read(1_000, 210.0)), (2_000, read(2_000, 250.0))] {
        rate = controller.step(&SETTINGS, rate, Some(&seen), now_ms).rate;
    }
    // No new reading came in time: the 250 ms one is judged again 1.5 s later.
    rate = controller
        .step(&SETTINGS, rate, Some(&read(2_000, 250.0)), 3_500)
        .rate;
    // 210 → 250 → 300 ms is still a climb.
    let step = controller.step(&SETTINGS, rate, Some(&read(4_000, 300.0)), 4_000);
    assert_eq!(step.reason, AutoRateReason::LatencyRising);
}
