use super::*;

mod cuts;
mod drain;
mod fluid;
mod rises;
mod trickle;
mod trouble;

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
        window_secs: None,
    }
}

/// Signals that count what was sent: `through` of `sent` answered without error, p95 `p95_ms`.
fn counted(sent: u64, through: u64, p95_ms: f64) -> OriginSignals {
    OriginSignals {
        sent: Some(sent),
        ..healthy(through, p95_ms)
    }
}

/// `counted` signals with `in_flight` requests in flight as the reading was taken.
fn in_flight(signals: OriginSignals, in_flight: u64) -> OriginSignals {
    OriginSignals {
        in_flight,
        ..signals
    }
}

/// A controller that saw 150/s answered with 40 in flight (a wait of 267 ms), then the
/// capacity halve to 75/s: the answers of the last complete second are as fast, but 115 are in
/// flight, grown by 75 in a second (a request sent now waits 767 ms): it cuts at once. What
/// waits past 80% of the target (55) and what the old rate still sends for a second (75 more)
/// would drain within a second only at −55/s: the drain is floored at × 0.1 of the rate, 15/s,
/// planned at 2 s.
fn halved_in_flight() -> Controller {
    let mut controller = Controller::default();
    let near = in_flight(counted(150, 150, 420.0), 40);
    let held = controller.step(&SETTINGS, 150.0, Some(&reading(1_000, near)), 1_000);
    assert_eq!((held.rate, held.reason), (150.0, AutoRateReason::AtTarget));
    let backlog = in_flight(counted(150, 150, 420.0), 115);
    let cut = controller.step(&SETTINGS, 150.0, Some(&reading(2_000, backlog)), 2_000);
    assert_eq!(cut.reason, AutoRateReason::LatencyHigh);
    assert!((cut.rate - 15.0).abs() < 1e-9, "{cut:?}");
    controller
}

/// The origin's `signals` as read at `at_ms`.
fn reading(at_ms: u64, signals: OriginSignals) -> Reading {
    Reading { at_ms, signals }
}

/// A fresh controller's first step, at 1 s, from `rate` on `signals` read then.
fn first_step(rate: f64, signals: OriginSignals) -> Decision {
    Controller::default().step(&SETTINGS, rate, Some(&reading(1_000, signals)), 1_000)
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
