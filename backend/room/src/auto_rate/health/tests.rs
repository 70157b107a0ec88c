use std::time::Instant as StdInstant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

const SIGNALS: &str =
    r#"{"requests":400,"p50Ms":40,"p95Ms":90,"errorRate":0.01,"inFlight":3,"sent":420}"#;

/// A one-shot origin on a free local port: answers the first request with `status` and `body`
/// after `delay`. Returns the health URL.
async fn origin(status: &'static str, body: &'static str, delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0_u8; 1024];
        let _ = socket.read(&mut request).await;
        tokio::time::sleep(delay).await;
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             location: /elsewhere\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = socket.write_all(answer.as_bytes()).await;
    });
    format!("http://{address}/health")
}

#[tokio::test]
async fn a_2xx_answer_with_signals_in_bounds_is_read() {
    let url = origin("200 OK", SIGNALS, Duration::ZERO).await;
    let signals = poll(&client().unwrap(), &url).await.unwrap();
    assert_eq!(
        (signals.requests, signals.p95_ms, signals.sent),
        (400, 90.0, Some(420))
    );
}

#[tokio::test]
async fn any_other_answer_reads_nothing() {
    let client = client().unwrap();
    let url = origin("500 Internal Server Error", SIGNALS, Duration::ZERO).await;
    assert!(matches!(
        poll(&client, &url).await,
        Err(PollError::Status(500))
    ));
    // A redirect is not followed.
    let url = origin("302 Found", "", Duration::ZERO).await;
    assert!(matches!(
        poll(&client, &url).await,
        Err(PollError::Status(302))
    ));
    for body in [
        r#"{"p95Ms":"slow"}"#,
        "<html>ok</html>",
        r#"{"requests":400,"p50Ms":40,"p95Ms":90,"errorRate":1.5,"inFlight":3}"#,
    ] {
        let url = origin("200 OK", body, Duration::ZERO).await;
        let read = poll(&client, &url).await;
        assert!(matches!(read, Err(PollError::Body(_))), "{body}: {read:?}");
    }
}

#[tokio::test]
async fn a_slow_or_absent_origin_reads_nothing_within_the_timeout() {
    let client = client().unwrap();
    let url = origin("200 OK", SIGNALS, Duration::from_secs(3)).await;
    let started = StdInstant::now();
    assert!(matches!(poll(&client, &url).await, Err(PollError::Timeout)));
    let took = started.elapsed();
    assert!(
        took >= POLL_TIMEOUT && took < POLL_EVERY,
        "gave up after {took:?}"
    );
    // Nobody listens on the port any more.
    let gone = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let read = poll(&client, &format!("http://{gone}/health")).await;
    assert!(matches!(read, Err(PollError::Transport(_))), "{read:?}");
}

#[test]
fn failures_are_warned_of_once_per_ten_seconds_with_their_count() {
    let mut warnings = Warnings::default();
    let start = Instant::now();
    assert_eq!(warnings.failed(start), Some(1), "the first at once");
    for second in 1..10 {
        assert_eq!(warnings.failed(start + Duration::from_secs(second)), None);
    }
    assert_eq!(warnings.failed(start + WARN_EVERY), Some(10));
    assert_eq!(warnings.failed(start + WARN_EVERY), None);
}

#[test]
fn the_wish_wakes_the_poller_only_when_it_changes_and_the_log_hides_the_query() {
    let health = HealthPoll::default();
    let mut wanted = health.wanted.subscribe();
    health.want(Some("https://shop.example/h"));
    assert!(wanted.has_changed().unwrap());
    wanted.borrow_and_update();
    health.want(Some("https://shop.example/h"));
    assert!(!wanted.has_changed().unwrap(), "the same URL again");
    health.want(None);
    assert_eq!(
        (wanted.has_changed().unwrap(), health.wanted()),
        (true, None)
    );
    assert_eq!(
        shown("https://shop.example/h?key=secret#x"),
        "https://shop.example/h"
    );
}
