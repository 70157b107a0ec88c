//! What an operator meets running Vestibule: a Redis that may evict keys, shutdown with clients
//! that never read, client addresses behind proxies, and a server started from another folder.
//! Each case first failed as tried by hand; each is kept here as the test of its fix.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vestibule_shared::{paths, TicketState};
use vestibule_tests::{vestibule_command, Backend, RedisServer, TestApp};

// ---------------------------------------------------------------------------------------------
// Redis settings that silently lose queue state
// ---------------------------------------------------------------------------------------------

fn evicting_redis() -> RedisServer {
    RedisServer::with_8mb_limit("volatile-lru", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_may_evict_keys_is_reported_at_start_in_readyz_and_in_metrics() {
    let redis = evicting_redis();
    let app =
        TestApp::spawn_with_url(Some(&redis.url()), &["--redis-safety-check-secs", "1"]).await;
    assert!(
        app.log().contains("maxmemory-policy is \"volatile-lru\""),
        "no warning at start:\n{}",
        app.log()
    );
    let (status, ready) = app.get_json(paths::READYZ).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready["redis"]["maxmemoryPolicy"], "volatile-lru", "{ready}");
    assert_eq!(ready["redis"]["maxmemoryBytes"], 8 * 1024 * 1024);
    let warnings = ready["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("noeviction")),
        "{ready}"
    );
    assert_eq!(app.metric("vestibule_store_may_evict").await, 1.0);
    assert_eq!(app.metric("vestibule_store_persistent").await, 0.0);

    // An operator fixes Redis at run time: the next check sees it.
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    redis.cli(&["CONFIG", "SET", "appendonly", "yes"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, ready) = app.get_json(paths::READYZ).await;
        if ready["warnings"].as_array().is_some_and(Vec::is_empty) {
            assert_eq!(ready["redis"]["maxmemoryPolicy"], "noeviction");
            break;
        }
        assert!(Instant::now() < deadline, "still warned: {ready}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(app.metric("vestibule_store_may_evict").await, 0.0);
    assert_eq!(app.metric("vestibule_store_persistent").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_safe_redis_refuses_to_start_on_an_evicting_redis() {
    let redis = evicting_redis();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = vestibule_command(Some(&redis.url()), &["--require-safe-redis"], "info");
        let output = command.output().expect("vestibule runs");
        drop(redis);
        output
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started anyway");
    assert!(
        stderr.contains("maxmemory-policy") && stderr.contains("noeviction"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_noeviction_redis_refuses_new_work_with_503_and_loses_nothing() {
    let redis = RedisServer::with_8mb_limit("noeviction", &[]);
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (_, admitted) = app.join("main", None).await;
    let token = app
        .poll_until("main", &admitted.ticket_id, Duration::from_secs(5), |t| {
            t.status == TicketState::TokenIssued
        })
        .await
        .entry_token
        .expect("admitted");
    app.patch_room("main", json!({"paused": true})).await;
    let (_, waiting) = app.join("main", Some("waiting-1")).await;
    // Fill Redis to its limit with data of no TTL (another tenant, a leak …).
    let filled = redis.fill_to_limit();
    let response = app
        .client
        .post(app.url(&paths::tickets("main")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"],
        "store_unavailable"
    );
    // Everything already there is intact.
    assert_eq!(app.poll("main", &waiting.ticket_id).await.position, Some(1));
    redis.unfill(filled);
    // Room again: the token issued before the pressure still buys its order.
    let (status, body) = app.order("main", Some(&token)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

// ---------------------------------------------------------------------------------------------
// Every wait on a client has a bound
// ---------------------------------------------------------------------------------------------

/// A client that pipelines `count` requests for the OpenAPI document on one connection with a
/// 4 KB receive buffer and never reads.
async fn stalled_reader(app: &TestApp, count: usize) -> tokio::net::TcpStream {
    let address: std::net::SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    let request = format!("GET {} HTTP/1.1\r\nHost: test\r\n\r\n", paths::OPENAPI);
    let mut pipelined = Vec::with_capacity(request.len() * count);
    for _ in 0..count {
        pipelined.extend_from_slice(request.as_bytes());
    }
    // The server stops reading once its answers back up; write what it takes.
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.write_all(&pipelined)).await;
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_within_the_grace_even_with_a_client_that_never_reads() {
    let mut app = TestApp::spawn(
        Backend::Memory,
        &["--shutdown-grace-secs", "2", "--write-timeout-secs", "600"],
    )
    .await;
    let _stalled = stalled_reader(&app, 1500).await;
    // Let the server fill the socket: its answers now wait on a client that never reads.
    tokio::time::sleep(Duration::from_secs(1)).await;
    app.signal("TERM");
    let started = Instant::now();
    let exit = app.wait_exit(Duration::from_secs(10)).await;
    let took = started.elapsed();
    println!("exit {exit:?} after {took:?}");
    assert!(exit.is_some(), "still running 10 s after SIGTERM");
    // The grace and then at once: the connection is dropped, nothing else waits (a black-box
    // probe once saw exits 1–1.4 s past the grace).
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} with a 2 s grace"
    );
    assert!(
        app.log().contains("still open after the shutdown grace"),
        "{}",
        app.log()
    );
}

/// The open-connection gauge of each serving thread, `[thread 0, thread 1, …]`.
async fn open_per_thread(app: &TestApp, threads: usize) -> Vec<f64> {
    let metrics = app.metrics().await;
    (0..threads)
        .map(|thread| {
            vestibule_tests::metric_value(
                &metrics,
                &format!("vestibule_connections_open{{thread=\"{thread}\"}}"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_spread_over_the_serving_threads_and_each_thread_serves_the_queue() {
    let app = TestApp::spawn(Backend::Redis, &["--serving-threads", "3"]).await;
    // Six kept-alive connections, each joining once: every thread serves two of them, and each
    // thread's own Redis connection answers its joins.
    let mut held = Vec::new();
    for shopper in 0..6 {
        let mut stream = tokio::net::TcpStream::connect(app.url("").trim_start_matches("http://"))
            .await
            .expect("connect");
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: x\r\nIdempotency-Key: spread-{shopper}\r\n\
             Content-Length: 0\r\n\r\n",
            paths::tickets("main")
        );
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut answer = vec![0_u8; 4096];
        let read = stream.read(&mut answer).await.expect("read");
        let head = String::from_utf8_lossy(&answer[..read]).to_string();
        assert!(
            head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.1 201"),
            "join {shopper}: {head}"
        );
        assert!(head.contains("\"ticketId\""), "join {shopper}: {head}");
        held.push(stream);
    }
    let open = open_per_thread(&app, 3).await;
    println!("open connections per thread: {open:?}");
    // Six held plus the one reading the metrics, handed to the least busy thread each time.
    assert_eq!(open.iter().sum::<f64>(), 7.0, "{open:?}");
    assert!(open.iter().all(|&count| count >= 2.0), "{open:?}");
    let redis = app.redis.as_ref().expect("redis");
    let clients = redis.cli(&["CLIENT", "LIST"]).lines().count();
    // The main connection, the schedulers', three serving threads' and this CLI's.
    assert!(clients >= 6, "{clients} Redis clients");
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let open = open_per_thread(&app, 3).await;
        if open.iter().sum::<f64>() <= 1.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "closed connections still counted: {open:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The nice value of each thread of process `pid`, by thread name, the main thread first
/// (Linux `/proc`).
fn thread_nice_values(pid: u32) -> Vec<(String, i64)> {
    // The main thread first (its id is the process's).
    let mut paths = vec![std::path::PathBuf::from(format!("/proc/{pid}/task/{pid}"))];
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads") {
        let path = task.expect("a thread").path();
        if !path.ends_with(pid.to_string()) {
            paths.push(path);
        }
    }
    let mut threads = Vec::new();
    for path in paths {
        let stat = std::fs::read_to_string(path.join("stat")).expect("a thread's stat");
        // `pid (name) state ppid …`: the name may hold spaces, so split after its `)`.
        let (head, rest) = stat.rsplit_once(')').expect("stat has a name");
        let name = head.split_once('(').map_or("", |(_, name)| name).to_owned();
        // After the name: state is field 3 and nice field 19 of the whole line.
        let nice = rest.split_whitespace().nth(16).expect("a nice field");
        threads.push((name, nice.parse().expect("a nice value")));
    }
    threads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_thread_alone_takes_the_asked_nice_value_and_reports_it() {
    // Raising a nice value needs no privilege, so this holds for any user; the default (-10,
    // lowering it) takes CAP_SYS_NICE, which a test cannot count on.
    let app = TestApp::spawn(Backend::Memory, &["--scheduler-nice", "7"]).await;
    // The scheduler's thread starts once the room is loaded, which may come after the server
    // first answers (seen on a loaded box: only the main and runtime threads yet).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let threads = loop {
        let threads = thread_nice_values(app.pid());
        if threads
            .iter()
            .any(|(name, _)| name.starts_with("vestibule-sched"))
            || std::time::Instant::now() > deadline
        {
            break threads;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!("threads and nice values: {threads:?}");
    let scheduler: Vec<_> = threads
        .iter()
        .filter(|(name, _)| name.starts_with("vestibule-sched"))
        .collect();
    assert_eq!(scheduler.len(), 1, "{threads:?}\n{}", app.log());
    assert_eq!(scheduler[0].1, 7, "{threads:?}");
    // The process's own (main thread's) value, whatever the test runs at.
    let main = &threads[0].1;
    assert!(
        threads
            .iter()
            .filter(|(name, _)| !name.starts_with("vestibule-sched"))
            .all(|(_, nice)| nice == main),
        "only the scheduler thread changes priority: {threads:?}"
    );
    assert_eq!(app.metric("vestibule_scheduler_nice").await, 7.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    let app = TestApp::spawn(Backend::Memory, &["--write-timeout-secs", "2"]).await;
    let mut stalled = stalled_reader(&app, 1500).await;
    let document_bytes = app.get_bytes(paths::OPENAPI).await.len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // The server has closed the connection: reading drains what was buffered, then ends.
    let mut received = 0usize;
    let mut buffer = vec![0u8; 64 * 1024];
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stalled.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received += n,
            }
        }
    })
    .await;
    println!("received {received} of {} bytes", 1500 * document_bytes);
    assert!(drained.is_ok(), "the connection is still open");
    assert!(received < 1500 * document_bytes, "every answer was sent");
    // Everyone else is served meanwhile.
    assert_eq!(app.get_json(paths::HEALTHZ).await.0, StatusCode::OK);
}

// ---------------------------------------------------------------------------------------------
// Client addresses behind proxies
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_pick_its_address_with_a_forwarded_header_line_of_its_own() {
    let app = TestApp::behind_proxy_with_join_limit("3", &[]).await;
    let mut statuses = Vec::new();
    for i in 0..6 {
        // The client's made-up line first, then the line the proxy appended.
        let mut headers = reqwest::header::HeaderMap::new();
        headers.append("x-forwarded-for", format!("10.9.8.{i}").parse().unwrap());
        headers.append("x-forwarded-for", "198.51.100.7".parse().unwrap());
        let response = app
            .client
            .post(app.url(&paths::tickets("main")))
            .headers(headers)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [201, 201, 201, 429, 429, 429]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_trusted_proxies_the_address_the_outer_one_saw_is_the_client() {
    let app = TestApp::behind_proxy_with_join_limit("1", &["--trusted-proxy-hops", "2"]).await;
    let join = |chain: &'static str| {
        app.client
            .post(app.url(&paths::tickets("main")))
            .header("X-Forwarded-For", chain)
            .send()
    };
    // Client spoofs the first entry; the CDN appended the real client, the proxy the CDN.
    let statuses = [
        join("6.6.6.1, [2001:db8::7]:51000, 10.0.0.2")
            .await
            .unwrap()
            .status(),
        join("6.6.6.2, 2001:db8::7, 10.0.0.2")
            .await
            .unwrap()
            .status(),
        join("6.6.6.3, 203.0.113.9, 10.0.0.2")
            .await
            .unwrap()
            .status(),
    ];
    assert_eq!(statuses.map(|s| s.as_u16()), [201, 429, 201]);
}

// ---------------------------------------------------------------------------------------------
// Started from another folder
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn started_outside_the_checkout_it_says_where_it_looked_for_the_page() {
    let elsewhere = tempfile::tempdir().unwrap();
    let app = TestApp::spawn_in(elsewhere.path(), None, &[]).await;
    let expected = elsewhere.path().canonicalize().unwrap().join("dist");
    let log = app.log();
    assert!(
        log.contains("the waiting-room page is not served")
            && (log.contains(&expected.display().to_string())
                || log.contains(&elsewhere.path().join("dist").display().to_string())),
        "{log}"
    );
    assert!(log.contains("--static-dir"), "{log}");
    // The API works regardless.
    assert_eq!(app.join("main", None).await.0, StatusCode::CREATED);
}

/// Resident memory of a process, KiB (`VmRSS`).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_sse_streams_that_never_read_hold_bounded_memory_while_the_room_admits() {
    const STREAMS: usize = 1000;
    let app = TestApp::spawn(
        Backend::Memory,
        &["--admission-rate", "20", "--write-timeout-secs", "5"],
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    let mut tickets = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        tickets.push(app.join("main", None).await.1.ticket_id);
    }
    let before = rss_kib(app.pid());
    let address: std::net::SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let mut streams = Vec::with_capacity(STREAMS);
    for ticket in &tickets {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(address).await.unwrap();
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n",
            paths::events("main", ticket)
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        streams.push(stream);
    }
    app.patch_room("main", json!({"paused": false})).await;
    let mut samples = Vec::new();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        samples.push(rss_kib(app.pid()));
    }
    let peak = samples.iter().copied().max().unwrap_or(0);
    let per_stream = peak.saturating_sub(before) * 1024 / STREAMS as u64;
    println!(
        "RSS before {before} KiB, with {STREAMS} non-reading SSE streams while admitting: \
         {samples:?} KiB; {per_stream} B per stream"
    );
    // Bounded: no growth with time once the streams are open, and a small cost per stream.
    assert!(per_stream < 64 * 1024, "{per_stream} B per stream");
    let last = *samples.last().unwrap();
    assert!(
        last <= samples[1] + 16 * 1024,
        "memory kept growing: {samples:?}"
    );
    assert_eq!(app.get_json(paths::HEALTHZ).await.0, StatusCode::OK);
    drop(streams);
}

// ---------------------------------------------------------------------------------------------
// Metrics every replica can stand behind
// ---------------------------------------------------------------------------------------------

/// Tried with two replicas (issue 14): the follower's `/metrics` had no waiting or active-users
/// figures and a replica that lost leadership kept its last ones, so summing replicas
/// double-counted; and no counter told 429s from 503s. Room gauges now come from the store at
/// scrape time (the same on every replica, at once), and every answer is counted by status and
/// error code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_reports_the_rooms_figures_from_the_store_and_counts_answers_by_code() {
    let redis = RedisServer::start();
    let args = ["--joins-per-ip-per-minute", "3"];
    let a = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    a.patch_room("main", json!({"paused": true})).await;
    let mut tickets = Vec::new();
    for key in ["k1", "k2", "k3"] {
        tickets.push(a.join("main", Some(key)).await.1);
    }
    let refused = b
        .client
        .post(b.url(&paths::tickets("main")))
        .header("Idempotency-Key", "k4")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);

    let waiting = "vestibule_waiting{room=\"main\"}";
    for app in [&a, &b] {
        let text = app.metrics().await;
        assert!(
            text.lines().any(|line| line == format!("{waiting} 3")),
            "every replica reports the room's 3 waiting:\n{text}"
        );
        assert!(
            text.contains("vestibule_active_users{room=\"main\"} 0\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE vestibule_waiting gauge").count(),
            1,
            "one family, no duplicate from the recorder:\n{text}"
        );
    }
    // A leave through A shows on B's next scrape, whoever leads and whenever it ticks.
    assert_eq!(
        a.leave("main", &tickets[0].ticket_id).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(b.metric(waiting).await, 2.0);

    let limited = "vestibule_http_responses_total{status=\"429\",code=\"rate_limited\"}";
    assert_eq!(b.metric(limited).await, 1.0, "{}", b.metrics().await);
    assert_eq!(a.metric(limited).await, 0.0, "counters are per process");
    let unknown_room = a
        .client
        .get(a.url(&paths::room("nope")))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_room.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        a.metric("vestibule_http_responses_total{status=\"404\",code=\"room_not_found\"}")
            .await,
        1.0
    );
    assert!(
        a.metric("vestibule_http_responses_total{status=\"201\",code=\"none\"}")
            .await
            >= 3.0,
        "successful joins are counted too"
    );
}
