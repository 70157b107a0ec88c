//! Leader failover (docs/guarantees.md): fast, and a paused old leader is fenced.

use serde_json::json;
use std::time::{Duration, Instant};
use vestibule_tests::{RedisServer, TestApp};

async fn leader_of(apps: &[&TestApp]) -> Option<usize> {
    for (i, app) in apps.iter().enumerate() {
        if app
            .metric("vestibule_scheduler_leader{room=\"main\"}")
            .await
            == 1.0
        {
            return Some(i);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_failover_is_fast_and_a_paused_old_leader_is_fenced() {
    const RATE: f64 = 20.0;
    const TICK_QUOTA: f64 = 3.0; // ⌈20 × 0.1⌉ + 1
    let redis = RedisServer::start();
    let args = ["--admission-rate", "20", "--lease-ms", "1000"];
    let mut apps = Vec::new();
    for _ in 0..3 {
        apps.push(Some(
            TestApp::spawn_with_url(Some(&redis.url()), &args).await,
        ));
    }
    let first = apps[0].as_ref().unwrap();
    first.patch_room("main", json!({"paused": true})).await;
    for _ in 0..400 {
        first.join("main", None).await;
    }
    first.patch_room("main", json!({"paused": false})).await;
    let sale_started = Instant::now();
    let waiting = || {
        redis
            .cli(&["ZCARD", "vestibule:{main}:g1:queue"])
            .parse::<f64>()
            .unwrap()
    };
    tokio::time::sleep(Duration::from_millis(600)).await;

    // SIGKILL the leader: another admits within the lease.
    let live: Vec<&TestApp> = apps.iter().flatten().collect();
    let leader = leader_of(&live).await.expect("one leader");
    apps[leader].as_ref().unwrap().signal("KILL");
    apps[leader] = None;
    let killed_at = Instant::now();
    let waiting_at_kill = waiting();
    let takeover = loop {
        if waiting() < waiting_at_kill {
            break killed_at.elapsed();
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(3),
            "no admission after the leader died"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!("takeover after SIGKILL: {takeover:?}");
    // The lease runs out at most 1000 ms after the dead leader's last renewal (which came before
    // the kill); a follower takes it on its next tick and admits on the one after.
    assert!(
        takeover <= Duration::from_millis(1000 + 2 * 100 + 300),
        "takeover took {takeover:?} (lease 1000 ms, tick 100 ms)"
    );

    // SIGSTOP the new leader past its lease; the third process takes over; SIGCONT: fenced.
    let live: Vec<&TestApp> = apps.iter().flatten().collect();
    let stopped = leader_of(&live).await.expect("a new leader");
    let stopped_app = live[stopped];
    let other = live[1 - stopped];
    stopped_app.signal("STOP");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        other
            .metric("vestibule_scheduler_leader{room=\"main\"}")
            .await,
        1.0,
        "the third process leads"
    );
    stopped_app.signal("CONT");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let fenced = stopped_app
        .metric("vestibule_admissions_fenced_total{room=\"main\"}")
        .await;
    assert!(
        fenced >= 1.0,
        "the old leader's admission was not refused by the epoch"
    );
    assert!(stopped_app.log().contains("refused by the fencing epoch"));

    // Over the whole sale: never more than rate × time + one tick's quota.
    let admitted = 400.0 - waiting();
    let allowed = RATE * sale_started.elapsed().as_secs_f64() + TICK_QUOTA;
    println!("admitted {admitted} ≤ {allowed:.1} allowed; fenced attempts {fenced}");
    assert!(admitted <= allowed, "admitted {admitted} > {allowed:.1}");
    assert!(admitted > 0.0);
}
