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
    // The first attempt on a connection of its own: the server hands a new connection to the
    // serving thread with the fewest (not the one serving `app.client`), and each serving thread
    // has its own connection to Redis. The second attempt, on `app.client`, is then the first
    // call since the crash on its thread's connection to Redis (each poll goes on its attempt's
    // connection): it must already know.
    let other = reqwest::Client::new();
    for attempt in 0..5 {
        let client = if attempt == 0 { &other } else { &app.client };
        let started = Instant::now();
        let response = client
            .post(app.url(&paths::tickets("main")))
            .send()
            .await
            .expect("answer during outage");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "join hung {:?}",
            started.elapsed()
        );
        // A join that met the connection as it broke may have reached Redis: 504 says "unknown".
        // From then on every connection of the process knows (store/redis/siblings.rs), so
        // nothing is sent: 503.
        let status = response.status();
        let expected = if attempt == 0 && status == StatusCode::GATEWAY_TIMEOUT {
            "store_timeout"
        } else {
            assert_eq!(
                status,
                StatusCode::SERVICE_UNAVAILABLE,
                "attempt {attempt}: {:?}\n{}",
                response.text().await,
                app.log()
            );
            "store_unavailable"
        };
        assert!(response.headers().contains_key("retry-after"));
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"], expected);
        let started = Instant::now();
        let status = client
            .get(app.url(&paths::ticket("main", &ticket.ticket_id)))
            .send()
            .await
            .expect("answer during outage")
            .status();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }
    let (status, _) = app.get_json(paths::READYZ).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    // At the default level (`info`) no request span is made: the outage's warning names the
    // request on its own line, the ticket id redacted.
    let log = app.log();
    assert!(
        log.lines().any(|line| line.contains("store call failed")
            && line.contains("method=POST")
            && line.contains("path=/api/v1/rooms/main/tickets")),
        "{log}"
    );
    assert!(
        log.lines().any(|line| line.contains("store call failed")
            && line.contains("method=GET")
            && line.contains("path=/api/v1/rooms/main/tickets/:id")),
        "{log}"
    );
    assert!(!log.contains(&ticket.ticket_id), "{log}");
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
    // Every connection of the process is told that Redis is back (store/redis/siblings.rs) and
    // reconnects at once; ready as soon as they all have.
    loop {
        let (status, _) = app.get_json(paths::READYZ).await;
        if status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "still not ready: {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!app.log().contains("panicked"), "{}", app.log());
}

/// A connection cut while Redis stays up (`CLIENT KILL`, as a proxy or a failover does) fails no
/// poll and no keyed join: a call that finds its connection dropped goes once more on the new
/// one when sending it twice means the same, also the first such call on each serving thread's
/// connection. Ticks 2 s apart, so that the scheduler's own calls do not find the cut first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_while_redis_stays_up_fails_no_poll_and_no_keyed_join() {
    let app = TestApp::spawn(Backend::Redis, &["--tick-ms", "2000", "--lease-ms", "5000"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, waiting) = app.join("main", None).await;
    // One client per serving thread and one more: each new connection goes to the thread with
    // the fewest, so the calls meet every thread's cut connection.
    let clients: Vec<_> = (0..4).map(|_| reqwest::Client::new()).collect();
    for client in &clients {
        let status = client
            .get(app.url(paths::HEALTHZ))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, StatusCode::OK);
    }
    let redis = app.redis.as_ref().unwrap();
    for round in 0..3 {
        let killed = redis.cli(&["CLIENT", "KILL", "TYPE", "normal"]);
        assert!(
            killed.trim().parse::<u32>().unwrap_or(0) >= 2,
            "round {round}: {killed}"
        );
        let calls = clients.iter().enumerate().map(|(index, client)| {
            let app = &app;
            let ticket = &waiting.ticket_id;
            async move {
                let request = if index % 2 == 0 {
                    client.get(app.url(&paths::ticket("main", ticket)))
                } else {
                    client
                        .post(app.url(&paths::tickets("main")))
                        .header("Idempotency-Key", format!("cut-{index}"))
                };
                let response = request.send().await.expect("an answer");
                (response.status(), response.text().await.unwrap_or_default())
            }
        });
        for (status, body) in futures_util::future::join_all(calls).await {
            assert!(
                status.is_success(),
                "round {round}: {status} {body}\n{}",
                app.log()
            );
        }
    }
}
