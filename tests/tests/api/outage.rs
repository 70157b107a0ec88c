//! A Redis outage: fast 503s while it lasts, service back by itself after it.

use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};
use vestibule_shared::paths;
use vestibule_tests::{Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_answers_503_fast_and_service_resumes_after_it() {
    let mut app = TestApp::spawn(Backend::Redis, &[]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, ticket) = app.join("main", None).await;
    app.redis.as_mut().unwrap().stop();
    for attempt in 0..5 {
        let started = Instant::now();
        let response = app
            .client
            .post(app.url(&paths::tickets("main")))
            .send()
            .await
            .expect("answer during outage");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "join hung {:?}",
            started.elapsed()
        );
        // A join that met the connection as it broke may have reached Redis: 504 says "unknown";
        // once the connection is known down, nothing is sent: 503.
        let status = response.status();
        let expected = if attempt == 0 && status == StatusCode::GATEWAY_TIMEOUT {
            "store_timeout"
        } else {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "attempt {attempt}");
            "store_unavailable"
        };
        assert!(response.headers().contains_key("retry-after"));
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"], expected);
        let started = Instant::now();
        let (status, _) = app
            .get_json(&paths::ticket("main", &ticket.ticket_id))
            .await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }
    let (status, _) = app.get_json(paths::READYZ).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    app.redis.as_mut().unwrap().restart();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let response = app
            .client
            .post(app.url(&paths::tickets("main")))
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::CREATED {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {} after Redis came back",
            response.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(app.get_json(paths::READYZ).await.0, StatusCode::OK);
    assert!(!app.log().contains("panicked"), "{}", app.log());
}
