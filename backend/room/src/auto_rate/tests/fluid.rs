//! The loop against a storefront modelled as a fluid, with the delays of a real deployment.

use super::*;

/// A storefront as a fluid: `capacity` requests per second served after a service time that
/// grows with load (and doubles when the capacity halves: each request is slower), a backlog in
/// front, and 5xx once two seconds' worth are waiting.
struct Origin {
    /// Requests/s served now.
    capacity: f64,
    /// Requests/s served at full strength: the service time is 200 ms there.
    full: f64,
    backlog: f64,
}

impl Origin {
    /// One second at `rate` requests/s in 100-ms steps: the window's signals.
    fn second(&mut self, rate: f64) -> OriginSignals {
        let (mut worst_ms, mut arrived, mut dropped, mut served) = (0.0_f64, 0.0, 0.0, 0.0);
        let service_ms = 200.0 * self.full / self.capacity;
        for _ in 0..10 {
            let arrivals = rate * 0.1;
            arrived += arrivals;
            self.backlog += arrivals;
            let room = 2.0 * self.capacity;
            if self.backlog > room {
                dropped += self.backlog - room;
                self.backlog = room;
            }
            let done = self.backlog.min(self.capacity * 0.1);
            served += done;
            self.backlog -= done;
            let utilization = (rate / self.capacity).min(1.0);
            let latency_ms =
                service_ms * (0.6 + 0.4 * utilization) + self.backlog / self.capacity * 1e3;
            worst_ms = worst_ms.max(latency_ms);
        }
        let answered = served + dropped;
        OriginSignals {
            requests: answered as u64,
            p50_ms: worst_ms * 0.8,
            p95_ms: worst_ms,
            error_rate: if answered > 0.0 {
                dropped / answered
            } else {
                0.0
            },
            // Waiting, and in service (Little's law: served/s × service time).
            in_flight: (self.backlog + (served * service_ms / 1e3)) as u64,
            sent: Some(arrived as u64),
            window_secs: None,
        }
    }
}

/// Seconds from the loop's decision until the origin sees the new rate: admitted shoppers check
/// out over the next second or so.
const ADMISSION_LAG_SECS: usize = 1;
/// Seconds from an origin's second until the leader reads it: the window takes complete
/// seconds only, and the replicas' figures are merged once a second.
const SIGNAL_LAG_SECS: usize = 1;

/// Runs the loop against `capacity(second)` for `secs` seconds from `start_rate`, with the
/// delays of a real deployment ([`ADMISSION_LAG_SECS`], [`SIGNAL_LAG_SECS`]): each second's
/// (rate the origin saw, signals).
fn run(start_rate: f64, secs: u64, capacity: impl Fn(u64) -> f64) -> Vec<(f64, OriginSignals)> {
    let mut origin = Origin {
        capacity: capacity(0),
        full: capacity(0),
        backlog: 0.0,
    };
    let mut controller = Controller::default();
    let mut decided = vec![start_rate; ADMISSION_LAG_SECS + 1];
    let mut trace: Vec<(f64, OriginSignals)> = Vec::new();
    for second in 0..secs {
        origin.capacity = capacity(second);
        let offered = decided[decided.len() - 1 - ADMISSION_LAG_SECS];
        let signals = origin.second(offered);
        trace.push((offered, signals));
        let now_ms = (second + 1) * 1_000;
        // The window's answers are a second late; what is in flight is counted as it is read.
        let seen = trace
            .len()
            .checked_sub(1 + SIGNAL_LAG_SECS)
            .map(|s| Reading {
                at_ms: (s as u64 + 1) * 1_000,
                signals: OriginSignals {
                    in_flight: signals.in_flight,
                    ..trace[s].1
                },
            });
        let rate = *decided.last().expect("a rate");
        decided.push(controller.step(&SETTINGS, rate, seen.as_ref(), now_ms).rate);
    }
    trace
}

#[test]
fn never_exceeds_max_and_reaches_it_on_an_origin_that_takes_everything() {
    let trace = run(10.0, 120, |_| 1e9);
    assert!(trace.iter().all(|(rate, _)| *rate <= SETTINGS.max));
    assert_eq!(trace.last().unwrap().0, SETTINGS.max);
}

/// Mean of the rates over seconds `from..to` of a trace.
fn mean_rate(trace: &[(f64, OriginSignals)], from: usize, to: usize) -> f64 {
    trace[from..to].iter().map(|(rate, _)| rate).sum::<f64>() / (to - from) as f64
}

#[test]
fn converges_on_a_constant_origin() {
    let trace = run(175.0, 120, |_| 150.0);
    let mean = mean_rate(&trace, 30, 120);
    assert!((0.9 * 150.0..=1.1 * 150.0).contains(&mean), "mean {mean}");
    let within = trace[30..]
        .iter()
        .filter(|(_, s)| s.p95_ms <= 500.0)
        .count();
    assert!(within * 100 >= 95 * 90, "p95 within target {within}/90 s");
}

#[test]
fn backs_off_within_ten_seconds_of_a_halving_and_recovers_within_thirty() {
    let capacity = |second: u64| {
        if (60..120).contains(&second) {
            75.0
        } else {
            150.0
        }
    };
    let trace = run(175.0, 180, capacity);
    let backed_off = (60..180)
        .find(|&s| trace[s].0 <= 75.0 * 1.1)
        .expect("never backed off");
    assert!(backed_off <= 70, "backed off at {backed_off} s");
    let recovered = (120..180)
        .find(|&s| trace[s].0 >= 0.9 * 150.0)
        .expect("never recovered");
    assert!(recovered <= 150, "recovered at {recovered} s");
    // Over a target only where no loop can avoid it, seen a second or two late: the first
    // seconds at the calculator's 175/s on a 150/s origin, and the backlog of the halving until
    // it drains (within 10 s). In the halved phase the origin's own p95 at full use is 80% of
    // the target, so a probe may cross it for a second now and then (at most 3); never in the
    // full-capacity phases. At most 20 of the 180 s.
    let over_at: Vec<usize> = (0..trace.len())
        .filter(|&s| trace[s].1.p95_ms > 500.0 || trace[s].1.error_rate > 0.01)
        .collect();
    let means: Vec<_> = [(20, 60), (75, 120), (150, 180)]
        .iter()
        .map(|&(from, to)| format!("{:.1}", mean_rate(&trace, from, to)))
        .collect();
    let rates: Vec<String> = trace
        .iter()
        .map(|(rate, s)| format!("{rate:.0}/{:.0}", s.p95_ms))
        .collect();
    println!(
        "backed off at {backed_off} s, recovered at {recovered} s, means {means:?}, {} s over \
         ({over_at:?}); rate/p95 by second: {}",
        over_at.len(),
        rates.join(" ")
    );
    assert!(
        over_at.iter().all(|&s| s < 8 || (60..120).contains(&s)),
        "over a target at {over_at:?}"
    );
    // The backlog of the halving is drained within a second of the cut, which comes a second or two
    // late: at most 5 s over (7 when a drain was floored at × 0.3 of the rate).
    let at_halving = over_at.iter().filter(|&&s| (60..70).contains(&s)).count();
    assert!(at_halving <= 5, "over a target at {over_at:?}");
    let halved_later = over_at.iter().filter(|&&s| (70..120).contains(&s)).count();
    assert!(halved_later <= 3, "over a target at {over_at:?}");
    assert!(over_at.len() <= 20, "over a target at {over_at:?}");
    for (from, to, capacity) in [(20, 60, 150.0), (75, 120, 75.0), (150, 180, 150.0)] {
        let mean = mean_rate(&trace, from, to);
        assert!(
            mean >= 0.9 * capacity,
            "mean {mean} over {from}..{to} s for {capacity}/s"
        );
    }
}

/// The gate black-box test's schedule (tests/tests/gate/auto_rate.rs) on a small origin: 40/s
/// for 25 s, halved for 20 s, restored; the loop starts at 20/s. The rate is back to 80% of the
/// capacity within 15 s of the restoration, though the origin struggled at the halved one.
#[test]
fn a_small_origin_is_followed_down_and_back_up_within_fifteen_seconds() {
    let capacity = |second: u64| {
        if (25..45).contains(&second) {
            20.0
        } else {
            40.0
        }
    };
    let trace = run(20.0, 75, capacity);
    let rates: Vec<String> = trace
        .iter()
        .map(|(rate, s)| format!("{rate:.1}/{:.0}", s.p95_ms))
        .collect();
    println!("rate/p95 by second: {}", rates.join(" "));
    let backed_off = (25..75)
        .find(|&s| trace[s].0 <= 20.0 * 1.25)
        .expect("never backed off");
    assert!(backed_off <= 35, "backed off at {backed_off} s");
    let recovered = (45..75)
        .find(|&s| trace[s].0 >= 0.8 * 40.0)
        .expect("never recovered");
    assert!(recovered <= 60, "recovered at {recovered} s");
    let mean = mean_rate(&trace, 60, 75);
    assert!(mean >= 0.85 * 40.0, "mean {mean} over the restored phase");
}
