//! A backlog counted in flight: drained within a second, then refilled to just under what the
//! origin answers; and when no drain is planned, or a planned one is given up.

use super::*;

#[test]
fn a_drained_backlog_refills_to_just_under_what_the_origin_answers() {
    let mut controller = halved_in_flight();
    // A second later the slow answers of the backlog come out, and 150 are still in flight:
    // the rate holds while the backlog drains.
    let draining = in_flight(counted(60, 75, 1_500.0), 150);
    let held = controller.step(&SETTINGS, 15.0, Some(&reading(3_000, draining)), 3_000);
    assert_eq!((held.rate, held.reason), (15.0, AutoRateReason::Settling));
    // Then 20 are in flight at 75 answered a second, a wait of 267 ms: the backlog is gone,
    // though the answers of the second before still waited in it. The rate returns at once to
    // 85% of 75/s.
    let drained = in_flight(counted(15, 75, 1_200.0), 20);
    let refill = controller.step(&SETTINGS, 15.0, Some(&reading(4_000, drained)), 4_000);
    assert_eq!(refill.reason, AutoRateReason::Drained, "{refill:?}");
    assert!((refill.rate - 63.75).abs() < 1e-9, "{refill:?}");
    // The readings of load offered before the refill hold it, slow answers and all.
    let old_news = in_flight(counted(15, 40, 700.0), 12);
    let held = controller.step(&SETTINGS, 63.75, Some(&reading(5_000, old_news)), 5_000);
    assert_eq!(held.reason, AutoRateReason::Settling, "{held:?}");
}

#[test]
fn a_refill_reads_what_the_origin_answers_a_second_low_on_every_count() {
    // Drained at 15/s, the origin answers 24 a second while 12 are sent a second, in a window
    // of two seconds (a trickle's): 48 answers, 24 sent. Read as a count, 48 a second; read
    // as the share answered (2) × what the rate in force sends (15/s), 30. The capacity the
    // cut measured is 75. The lowest, 30 a second, is the pace read.
    let mut controller = halved_in_flight();
    let trickle = in_flight(counted(24, 48, 900.0), 6);
    let refill = controller.step(&SETTINGS, 15.0, Some(&reading(3_000, trickle)), 3_000);
    assert_eq!(refill.reason, AutoRateReason::Drained, "{refill:?}");
    assert!((refill.rate - 25.5).abs() < 1e-9, "{refill:?}");
    // Read just after the cut, a window's sent is mostly the old rate's: 140 answered of 150
    // sent reads as 0.93 × 15 = 14 a second (low, on the safe side), so 9 in flight wait
    // 640 ms: no refill yet, whatever its count of answers (140) says.
    let mut controller = halved_in_flight();
    let straddled = in_flight(counted(150, 140, 900.0), 9);
    let held = controller.step(&SETTINGS, 15.0, Some(&reading(3_000, straddled)), 3_000);
    assert_eq!(held.reason, AutoRateReason::Settling, "{held:?}");
}

#[test]
fn no_refill_before_the_backlog_is_gone_nor_past_eight_seconds() {
    // 32 in flight at 75 answered a second: a wait of 427 ms, past 80% of the target though
    // under it. The rate holds at its target (no cut, no refill).
    let still = || in_flight(counted(15, 75, 450.0), 32);
    let gone = in_flight(counted(15, 75, 300.0), 10);
    for refill_at in [9_000, 11_000] {
        let mut controller = halved_in_flight();
        let mut rate = 15.0;
        for at_ms in (3_000..refill_at).step_by(1_000) {
            let step = controller.step(&SETTINGS, rate, Some(&reading(at_ms, still())), at_ms);
            assert_ne!(step.reason, AutoRateReason::Drained, "at {at_ms} ms");
            rate = step.rate;
        }
        assert_eq!(rate, 15.0);
        let step = controller.step(&SETTINGS, rate, Some(&reading(refill_at, gone)), refill_at);
        // Within 8 s of the drain's start the plan stands through the holds; past it, not.
        let refilled = step.reason == AutoRateReason::Drained;
        assert_eq!(refilled, refill_at <= 10_000, "at {refill_at} ms: {step:?}");
    }
}

#[test]
fn an_operators_change_during_a_drain_drops_it() {
    let mut controller = halved_in_flight();
    // The operator sets 12/s; the backlog drains: no refill over the operator's rate.
    let gone = in_flight(counted(12, 75, 300.0), 10);
    let step = controller.step(&SETTINGS, 12.0, Some(&reading(3_000, gone)), 3_000);
    assert_ne!(step.reason, AutoRateReason::Drained, "{step:?}");
}

#[test]
fn errors_and_a_trickle_plan_no_drain() {
    // Errors over the limit cut by × 0.7 (floored at × 0.3 under a measured capacity), however
    // many wait in flight: an instant 503 is no backlog to drain.
    let mut controller = Controller::default();
    let near = in_flight(counted(100, 100, 200.0), 20);
    controller.step(&SETTINGS, 100.0, Some(&reading(1_000, near)), 1_000);
    let failing = OriginSignals {
        error_rate: 0.5,
        ..in_flight(counted(100, 100, 200.0), 40)
    };
    let cut = controller.step(&SETTINGS, 100.0, Some(&reading(2_000, failing)), 2_000);
    assert_eq!(cut.reason, AutoRateReason::ErrorsHigh);
    assert!(cut.rate >= 30.0, "{cut:?}");
    assert!(controller.drain.is_none());
    // At 40 answers a second the window may span several seconds: its counts are not per
    // second, and no drain is sized by them.
    let mut controller = Controller::default();
    let near = in_flight(counted(40, 40, 420.0), 12);
    controller.step(&SETTINGS, 40.0, Some(&reading(1_000, near)), 1_000);
    let backlog = in_flight(counted(40, 30, 450.0), 30);
    let cut = controller.step(&SETTINGS, 40.0, Some(&reading(2_000, backlog)), 2_000);
    assert_eq!(cut.reason, AutoRateReason::LatencyHigh);
    assert!(cut.rate >= 12.0 - 1e-9, "{cut:?}");
    assert!(controller.drain.is_none());
}
