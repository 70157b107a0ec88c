//! The serving threads and the scheduler's: connections spread over the serving threads, each
//! with its own Redis connection, and only the scheduler thread takes the asked nice value.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vestibule_shared::paths;
use vestibule_tests::{Backend, TestApp};

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
    // first answers (seen on a loaded box: only the main and runtime threads yet), and it asks
    // for its priority as its first step, just after it appears under its name.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let threads = loop {
        let threads = thread_nice_values(app.pid());
        if threads
            .iter()
            .any(|(name, nice)| name.starts_with("vestibule-sched") && *nice == 7)
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
