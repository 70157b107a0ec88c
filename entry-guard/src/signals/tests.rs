use std::convert::Infallible;
use std::sync::Arc;

use axum::http::{Response, StatusCode};

use super::window::{Window, ENOUGH_ANSWERS, WINDOW_SECS};
use super::{Meter, OriginSignals};

/// `count` requests sent and answered in the second of `at_ms`, each after `latency_ms`.
fn answers(window: &mut Window, at_ms: u64, count: u64, latency_ms: f64, errors: u64) {
    for n in 0..count {
        window.sent(at_ms);
        window.answered(at_ms, latency_ms, n < errors);
    }
}

#[test]
fn the_newest_complete_seconds_with_enough_answers_are_read() {
    let mut window = Window::default();
    // Second 10: a backlog's 40 slow answers; seconds 11 and 12: 20 quick ones each.
    answers(&mut window, 10_300, 40, 3_000.0, 0);
    answers(&mut window, 11_300, 20, 100.0, 0);
    answers(&mut window, 12_300, 20, 100.0, 0);
    let newest = window.read(13_000);
    assert_eq!((newest.requests, newest.sent), (40, 40), "{newest:?}");
    assert_eq!(newest.window_secs, 2, "{newest:?}");
    assert!(
        newest.p95_ms < 200.0,
        "the drained backlog no longer counts: {newest:?}"
    );
    // Too few in the newest second alone: older seconds are read until 30, whole.
    let mut thin = Window::default();
    answers(&mut thin, 10_300, 40, 3_000.0, 0);
    answers(&mut thin, 12_300, 20, 100.0, 0);
    let older = thin.read(13_000);
    assert_eq!(older.requests, 20 + 40, "{older:?}");
    assert_eq!(older.window_secs, 3, "back to second 10: {older:?}");
    assert!(older.p95_ms >= 3_000.0, "{older:?}");
    // The current, partial second is left out until it is over.
    answers(&mut window, 13_100, 50, 10.0, 0);
    assert_eq!(window.read(13_900).requests, 40);
    assert_eq!(window.read(14_000).requests, 50);
}

#[test]
fn a_trickle_is_read_over_the_whole_window_and_older_seconds_are_forgotten() {
    let mut window = Window::default();
    for second in 1..=WINDOW_SECS {
        answers(&mut window, second * 1000 + 100, 2, 50.0, 0);
    }
    let signals = window.read((WINDOW_SECS + 1) * 1000);
    assert_eq!(signals.requests, 2 * WINDOW_SECS);
    assert_eq!(signals.window_secs, WINDOW_SECS);
    assert!(signals.requests < ENOUGH_ANSWERS);
    // A second later the first second is out of the window.
    assert_eq!(
        window.read((WINDOW_SECS + 2) * 1000).requests,
        2 * (WINDOW_SECS - 1)
    );
    // A bucket reused for a later second starts empty.
    answers(&mut window, (WINDOW_SECS + 1) * 1000 + 100, 1, 50.0, 1);
    let reused = window.read((WINDOW_SECS + 2) * 1000);
    assert_eq!(reused.requests, 2 * (WINDOW_SECS - 1) + 1);
    assert!(reused.error_rate > 0.0);
}

#[test]
fn the_p95_comes_from_the_histogram_within_a_bucket() {
    let mut window = Window::default();
    // 95 answers of 100 ms and 5 of 2 s.
    answers(&mut window, 5_200, 95, 100.0, 0);
    answers(&mut window, 5_700, 5, 2_000.0, 0);
    let signals = window.read(6_000);
    assert_eq!(signals.requests, 100);
    assert!((100.0..=119.0).contains(&signals.p50_ms), "{signals:?}");
    assert!((100.0..=119.0).contains(&signals.p95_ms), "{signals:?}");
    // One more slow answer: 6 of 101 are over 5%, so the p95 is a slow one's bucket.
    answers(&mut window, 5_800, 1, 2_000.0, 0);
    let p95 = window.read(6_000).p95_ms;
    assert!((2_000.0..=2_380.0).contains(&p95), "p95 {p95}");
    // Latencies past the last bucket and under 1 ms stay in the end buckets.
    let mut ends = Window::default();
    answers(&mut ends, 1_000, 10, 1e9, 0);
    answers(&mut ends, 1_000, 10, 0.0, 0);
    let read = ends.read(2_000);
    assert_eq!(read.p50_ms, 1.0);
    assert!((50_000.0..=60_000.0).contains(&read.p95_ms), "{read:?}");
}

#[test]
fn the_error_rate_and_sent_count_the_seconds_read() {
    let mut window = Window::default();
    answers(&mut window, 7_100, 40, 80.0, 6);
    // Sent in this second, still in flight: sent, not answered.
    for _ in 0..5 {
        window.sent(7_500);
    }
    let signals = window.read(8_000);
    assert_eq!((signals.requests, signals.sent), (40, 45));
    assert!((signals.error_rate - 0.15).abs() < 1e-9, "{signals:?}");
    assert_eq!(signals.in_flight, 5);
    // Two answered in the next second (counted there), one given up.
    window.answered(8_200, 900.0, false);
    window.answered(8_300, 900.0, true);
    window.abandoned();
    assert_eq!(window.read(9_000).in_flight, 2);
}

#[test]
fn an_empty_window_reads_zero_requests() {
    let window = Window::default();
    let expected = OriginSignals {
        requests: 0,
        p50_ms: 0.0,
        p95_ms: 0.0,
        error_rate: 0.0,
        in_flight: 0,
        sent: 0,
        window_secs: WINDOW_SECS,
    };
    assert_eq!(window.read(0), expected);
    assert_eq!(window.read(60_000), expected);
    // Requests passed in but not answered: requests 0, and what was sent and is in flight.
    let mut waiting = Window::default();
    waiting.sent(3_100);
    waiting.sent(3_200);
    let read = waiting.read(4_000);
    assert_eq!((read.requests, read.sent, read.in_flight), (0, 2, 2));
    assert_eq!(read.window_secs, 1, "one second read");
    assert_eq!((read.p95_ms, read.error_rate), (0.0, 0.0));
    // Old answers age out to requests 0 again.
    let mut old = Window::default();
    answers(&mut old, 1_000, 3, 50.0, 0);
    assert_eq!(old.read((WINDOW_SECS + 2) * 1000), expected);
}

fn answer(status: StatusCode) -> Result<Response<()>, Infallible> {
    Ok(Response::builder().status(status).body(()).unwrap())
}

/// The meter's window read as if the current second were over.
fn read_now(meter: &Meter) -> OriginSignals {
    meter.window().read(meter.now_ms() + 1000)
}

#[tokio::test]
async fn the_meter_counts_answers_5xx_and_failures_as_errors_and_drops_as_given_up() {
    let meter = Arc::new(Meter::default());
    meter
        .measure(async { answer(StatusCode::OK) })
        .await
        .unwrap();
    meter
        .measure(async { answer(StatusCode::SEE_OTHER) })
        .await
        .unwrap();
    meter
        .measure(async { answer(StatusCode::BAD_GATEWAY) })
        .await
        .unwrap();
    let failed = meter
        .measure(async { Err::<Response<()>, _>("the inner service failed") })
        .await;
    assert!(failed.is_err());
    let signals = read_now(&meter);
    assert_eq!((signals.requests, signals.sent), (4, 4), "{signals:?}");
    assert_eq!(signals.error_rate, 0.5, "502 and the failure: {signals:?}");
    assert_eq!(signals.in_flight, 0);

    // A request in flight counts as sent; dropped before its answer it is no answer.
    let pending = meter.measure(std::future::pending::<Result<Response<()>, Infallible>>());
    let mut pending = Box::pin(pending);
    assert!(futures_poll_once(pending.as_mut()).await.is_none());
    let signals = read_now(&meter);
    assert_eq!((signals.sent, signals.in_flight), (5, 1));
    drop(pending);
    let signals = read_now(&meter);
    assert_eq!((signals.requests, signals.in_flight), (4, 0));
}

#[tokio::test]
async fn a_panicking_handler_is_a_failed_answer() {
    let meter = Arc::new(Meter::default());
    let measured = meter.clone();
    let outcome = tokio::spawn(async move {
        measured
            .measure(async {
                if std::hint::black_box(true) {
                    panic!("the handler panicked");
                }
                answer(StatusCode::OK)
            })
            .await
    })
    .await;
    assert!(outcome.is_err(), "the panic reached the task");
    let signals = read_now(&meter);
    assert_eq!(
        (signals.requests, signals.error_rate, signals.in_flight),
        (1, 1.0, 0)
    );
}

#[tokio::test]
async fn latency_runs_from_passing_in_to_the_answer() {
    let meter = Arc::new(Meter::default());
    meter
        .measure(async {
            tokio::time::sleep(std::time::Duration::from_millis(120)).await;
            answer(StatusCode::OK)
        })
        .await
        .unwrap();
    let p95 = read_now(&meter).p95_ms;
    assert!((120.0..=170.0).contains(&p95), "p95 {p95}");
}

/// Polls `future` once: its output if it is ready.
async fn futures_poll_once<F: std::future::Future + Unpin>(future: F) -> Option<F::Output> {
    let mut future = future;
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        })
    })
    .await
}
