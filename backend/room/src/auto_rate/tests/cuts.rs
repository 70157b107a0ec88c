//! Cuts over a target: how deep (by the overshoot, under a measured capacity), against which
//! offered rate, and when a reading over the target holds instead (settling, a draining backlog).

use super::*;

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
    let overloaded = counted(200, 100, 700.0);
    let cut = controller.step(&SETTINGS, 200.0, Some(&reading(1_000, overloaded)), 1_000);
    assert_eq!(cut.reason, AutoRateReason::LatencyHigh);
    // Under the capacity by the overshoot (× 500 ÷ 700) or by the share it took of what it
    // was sent (× 0.5), the deeper, so the load on its way drains too; but one step never cuts
    // below × 0.3 of the rate: 60/s.
    assert!((cut.rate - 60.0).abs() < 1e-9, "{cut:?}");
    // Past the settling time the latency is still over the target, but the origin answers more
    // than it is sent and the p95 falls: its backlog drains, so the rate holds.
    let draining = counted(80, 100, 600.0);
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
    let cut = first_step(200.0, counted(200, 150, 550.0));
    assert!((cut.rate - 112.5).abs() < 1e-9, "{cut:?}");
    // Just past the capacity (90% taken) the 80% stands.
    let cut = first_step(200.0, counted(200, 180, 550.0));
    assert!((cut.rate - 144.0).abs() < 1e-9, "{cut:?}");
    // A single step never cuts below × 0.3, whatever the share says.
    let deepest = first_step(200.0, counted(1_000, 20, 5_000.0));
    assert!((deepest.rate - 60.0).abs() < 1e-9, "{deepest:?}");
}

#[test]
fn capacity_is_read_against_the_rate_that_offered_the_load() {
    let mut controller = Controller::default();
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
    let overloaded = counted(100, 80, 625.0);
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
    let slow = counted(150, 100, 1_500.0);
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
fn an_origin_slow_at_any_load_is_cut_though_it_answers_what_it_is_sent() {
    let mut controller = Controller::default();
    // 100 sent, 100 answered, all slow: no backlog to wait for, so every few seconds it cuts.
    let slow = counted(100, 100, 800.0);
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
fn a_burst_over_the_target_is_read_by_the_share_of_the_last_seconds() {
    let mut controller = Controller::default();
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
fn after_a_cut_under_a_measured_capacity_a_backlog_drains_without_a_second_cut() {
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

#[test]
fn a_backlog_in_flight_cuts_before_the_answers_show_it() {
    // The answers are as fast as before, but what is in flight grew (see `halved_in_flight`).
    halved_in_flight();
    // A few requests admitted together are no backlog: under 10 in flight the wait is not read.
    let few = first_step(10.0, in_flight(counted(12, 12, 300.0), 9));
    assert_ne!(few.reason, AutoRateReason::LatencyHigh);
    // Nor on a first reading with traffic (a sale's opening): its answers lag what was sent.
    let opening = first_step(150.0, in_flight(counted(150, 60, 300.0), 60));
    assert_ne!(opening.reason, AutoRateReason::LatencyHigh);
}

#[test]
fn a_cut_made_before_the_capacity_showed_is_sized_again_by_it() {
    let mut controller = Controller::default();
    // Slow answers, but the origin still answered what it was sent: no capacity is measured
    // yet, and the cut goes by the overshoot (× 500 ÷ 800).
    let slow = counted(200, 200, 800.0);
    let cut = controller.step(&SETTINGS, 200.0, Some(&reading(1_000, slow)), 1_000);
    assert_eq!((cut.rate, cut.reason), (125.0, AutoRateReason::LatencyHigh));
    // The next reading, of load offered before the cut (read at 1.9 s), shows the origin got half of it
    // through: 100/s, under the 125/s the rate is at, where no backlog drains. It cuts again,
    // under the capacity, though the first cut is only a second old.
    let overloaded = counted(200, 100, 1_500.0);
    let again = controller.step(&SETTINGS, 125.0, Some(&reading(1_900, overloaded)), 2_000);
    assert_eq!(again.reason, AutoRateReason::LatencyHigh);
    assert!((again.rate - 50.0).abs() < 1e-9, "{again:?}");
    // Once a cut was sized by a capacity, readings of its load hold.
    let still = counted(125, 60, 1_800.0);
    let held = controller.step(&SETTINGS, 50.0, Some(&reading(2_900, still)), 3_000);
    assert_eq!(held.reason, AutoRateReason::Settling);
}

#[test]
fn a_backlog_that_drains_too_slowly_for_the_target_is_cut_again() {
    let after_a_cut = |in_flight_later: u64| {
        let mut controller = Controller::default();
        // The halving's first reading: 89 of 157 got through, 110 in flight.
        let halved = in_flight(counted(157, 89, 900.0), 110);
        let cut = controller.step(&SETTINGS, 157.0, Some(&reading(1_000, halved)), 1_000);
        assert_eq!(cut.reason, AutoRateReason::LatencyHigh);
        // Say the lag overstated the capacity and the rate went to 66/s: the origin answers
        // 75/s, over what it is sent, with 180 in flight.
        let first = in_flight(counted(66, 75, 1_800.0), 180);
        let held = controller.step(&SETTINGS, 66.0, Some(&reading(3_900, first)), 4_000);
        assert_eq!(held.reason, AutoRateReason::Settling);
        let next = in_flight(counted(66, 75, 1_700.0), in_flight_later);
        controller.step(&SETTINGS, 66.0, Some(&reading(4_900, next)), 5_000)
    };
    // 9 fewer in flight a second: what waits past the target (about 130) would take 15 s to
    // drain, so the rate is cut again.
    assert_eq!(after_a_cut(171).reason, AutoRateReason::LatencyHigh);
    // 40 fewer a second: gone within 4 s, so the rate holds while it drains.
    assert_eq!(after_a_cut(140).reason, AutoRateReason::Settling);
}

#[test]
fn a_falling_p95_does_not_hold_a_backlog_seen_in_flight() {
    let mut controller = Controller::default();
    // The p95 climbs 210 → 250 → 300 ms at 150/s: the rate is trimmed.
    let mut rate = 150.0;
    let mut last = None;
    for (second, p95_ms, in_flight_now) in [(1, 210.0, 40), (2, 250.0, 45), (3, 300.0, 50)] {
        let seen = in_flight(counted(150, 150, p95_ms), in_flight_now);
        let step = controller.step(
            &SETTINGS,
            rate,
            Some(&reading(second * 1_000, seen)),
            second * 1_000,
        );
        rate = step.rate;
        last = Some(step.reason);
    }
    assert_eq!(last, Some(AutoRateReason::LatencyRising));
    // An earlier cut measured the origin's capacity at 300/s (a cut sized by none would be
    // sized again at once, settling or not).
    controller.measured_capacity = Some(300.0);
    // Then the capacity halves: the answers of the last second are faster than the ones before
    // (the trim's), but 120 are in flight, a wait of 800 ms. The rate is cut, not held.
    let halved = in_flight(counted(150, 150, 260.0), 120);
    let step = controller.step(&SETTINGS, rate, Some(&reading(4_000, halved)), 4_000);
    assert_eq!(step.reason, AutoRateReason::LatencyHigh, "{step:?}");
}

/// After a cut at 40/s, the shoppers admitted before it still send their requests a second or
/// two late, so the window's sent count runs over what the origin answers (49 sent, 40
/// answered) while the count in flight falls 36 → 29 in 1.1 s: the backlog drains within 4 s at
/// that pace, and the rate holds. Growing in flight, the same reading cuts again.
#[test]
fn a_backlog_shrinking_in_flight_holds_though_late_sends_outrun_the_answers() {
    let step = |controller: &mut Controller, rate: f64, at_ms: u64, signals: OriginSignals| {
        controller.step(&SETTINGS, rate, Some(&reading(at_ms, signals)), at_ms)
    };
    let after_the_cut = |last_in_flight: u64| {
        let mut controller = Controller::default();
        step(
            &mut controller,
            40.0,
            1_000,
            in_flight(counted(40, 40, 300.0), 10),
        );
        let cut = step(
            &mut controller,
            40.0,
            2_000,
            in_flight(counted(67, 59, 624.0), 42),
        );
        assert_eq!(cut.reason, AutoRateReason::LatencyHigh, "{cut:?}");
        let late = in_flight(counted(55, 45, 1_200.0), 36);
        let held = step(&mut controller, cut.rate, 3_000, late);
        assert_eq!(held.reason, AutoRateReason::Settling, "{held:?}");
        let next = in_flight(counted(49, 40, 1_772.0), last_in_flight);
        (cut.rate, step(&mut controller, cut.rate, 4_100, next))
    };
    let (rate, shrinking) = after_the_cut(29);
    assert_eq!(
        (shrinking.rate, shrinking.reason),
        (rate, AutoRateReason::Settling)
    );
    let (rate, growing) = after_the_cut(44);
    assert_eq!(growing.reason, AutoRateReason::LatencyHigh, "{growing:?}");
    assert!(growing.rate < rate, "{growing:?}");
}
