//! A trickle's window: at a few answers a second the signals span several seconds
//! (`windowSecs`), so their counts are read per second over that span, and their slow answers
//! may be of a backlog that drained since.

use super::*;

/// 30 answers over `window_secs` seconds (as many sent), p95 884 ms, `in_flight` in flight.
fn trickle(window_secs: Option<u64>, requests: u64, in_flight: u64) -> OriginSignals {
    OriginSignals {
        window_secs,
        in_flight,
        ..counted(requests, requests, 884.0)
    }
}

/// At 20/s after a drained backlog: the window spans four seconds (30 answers, 7.5 a second)
/// and its p95 is still the backlog's, but the 2 in flight now wait 267 ms at that pace.
#[test]
fn a_trickles_slow_answers_of_a_drained_backlog_hold_the_rate() {
    let drained = trickle(Some(4), 30, 2);
    let held = first_step(20.0, drained);
    assert_eq!((held.rate, held.reason), (20.0, AutoRateReason::Settling));
    // The same answers reported as one second's (a storefront that does not say its window):
    // nothing tells them from a backlog now, and the p95 cuts.
    let unstated = first_step(20.0, trickle(None, 30, 2));
    assert_eq!(unstated.reason, AutoRateReason::LatencyHigh);
    assert!(unstated.rate < 20.0, "{unstated:?}");
}

#[test]
fn a_trickle_still_waiting_now_is_cut() {
    // Nine in flight at 3 answers a second (12 over four seconds) wait 3 s: a backlog now.
    let waiting = first_step(20.0, trickle(Some(4), 12, 9));
    assert_eq!(waiting.reason, AutoRateReason::LatencyHigh);
    assert!(waiting.rate < 20.0, "{waiting:?}");
    // A count in flight that grows is a backlog forming, however short its wait yet: 5, then
    // 11 in flight at 29 answers a second (58 over two seconds) wait 379 ms.
    let mut controller = Controller::default();
    let before = reading(1_000, trickle(Some(2), 58, 5));
    let held = controller.step(&SETTINGS, 20.0, Some(&before), 1_000);
    assert_eq!(held.reason, AutoRateReason::Settling, "{held:?}");
    let growing = reading(2_000, trickle(Some(2), 58, 11));
    let cut = controller.step(&SETTINGS, 20.0, Some(&growing), 2_000);
    assert_eq!(cut.reason, AutoRateReason::LatencyHigh, "{cut:?}");
}

#[test]
fn the_wait_in_flight_is_read_at_the_windows_pace() {
    // 40 answers over four seconds (10 a second, p95 300 ms) and 15 in flight: a request sent
    // now waits 1.5 s, three times the target, though every answer so far was quick. Read as
    // one second's answers, the same counts would say 375 ms.
    let mut controller = Controller::default();
    let quick = |in_flight| OriginSignals {
        window_secs: Some(4),
        in_flight,
        ..counted(40, 40, 300.0)
    };
    controller.step(&SETTINGS, 20.0, Some(&reading(1_000, quick(5))), 1_000);
    let piled = controller.step(&SETTINGS, 20.0, Some(&reading(2_000, quick(15))), 2_000);
    assert_eq!(piled.reason, AutoRateReason::LatencyHigh, "{piled:?}");
    let mut unstated = Controller::default();
    let one_second = |in_flight| OriginSignals {
        window_secs: None,
        ..quick(in_flight)
    };
    unstated.step(&SETTINGS, 20.0, Some(&reading(1_000, one_second(5))), 1_000);
    let read_fast = unstated.step(
        &SETTINGS,
        20.0,
        Some(&reading(2_000, one_second(15))),
        2_000,
    );
    assert_ne!(
        read_fast.reason,
        AutoRateReason::LatencyHigh,
        "{read_fast:?}"
    );
}
