use std::io::Write;
use std::sync::Mutex;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use tower::ServiceExt as _;

use super::*;

/// A log sink the test reads back.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn log_of(path: &str) -> (StatusCode, String) {
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = Router::new()
        .route(
            "/internal",
            get(|| async { ApiError::Internal(anyhow::anyhow!("disk on fire")) }),
        )
        .route(
            "/store",
            get(|| async { ApiError::from(StoreError::Unavailable("refused".into())) }),
        )
        .route(
            "/bad",
            get(|| async { ApiError::InvalidField("tokenTtlSecs must be 1–86400 s".into()) }),
        )
        .route("/ok", get(|| async { "fine" }))
        .layer(axum::middleware::from_fn(log_errors));
    let request = Request::builder().uri(path).body(Body::empty()).unwrap();
    let status = app.oneshot(request).await.unwrap().status();
    let log = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    (status, log)
}

#[tokio::test]
async fn the_layer_logs_each_error_once_at_its_level() {
    let (status, log) = log_of("/internal").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(
        log.contains("ERROR") && log.contains("disk on fire"),
        "{log}"
    );
    // The request is named on the line itself (no span at the default level).
    assert!(
        log.contains("method=GET") && log.contains("path=/internal"),
        "{log}"
    );

    let (status, log) = log_of("/store").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("WARN") && log.contains("refused"), "{log}");

    let (status, log) = log_of("/bad").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(
        log.contains("DEBUG") && log.contains("invalid_field"),
        "{log}"
    );

    let (status, log) = log_of("/ok").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(log, "");
}
