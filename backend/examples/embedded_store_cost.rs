//! In-process cost of the durable embedded store against the memory-only engine, same run:
//! joins/s and polls/s through the `Store` trait (one caller, no HTTP), then snapshot and
//! restart (recovery) time with many tickets waiting.
//!
//! `cargo run --release -p vestibule --example embedded_store_cost [-- WAITING]` (default
//! 1,000,000 waiting for the snapshot figures). Writes only in a temp folder. About 30 s.

use std::time::{Duration, Instant};

use vestibule::ids::random_id;
use vestibule::store::durable::{DurableOptions, DurableStore, FsyncPolicy};
use vestibule::store::memory::MemoryStore;
use vestibule::store::{now_ms, RoomConfig, Store};

const ROOM: &str = "main";
/// How long each closed loop runs.
const WINDOW: Duration = Duration::from_secs(2);

fn defaults() -> RoomConfig {
    RoomConfig {
        admission_rate_per_sec: 0.0,
        paused: false,
        token_ttl_ms: 60_000,
        max_active_users: None,
    }
}

/// Keyed joins for [`WINDOW`]; returns joins/s and the ids.
async fn joins(store: &dyn Store) -> (f64, Vec<String>) {
    let start = Instant::now();
    let mut ids = Vec::new();
    while start.elapsed() < WINDOW {
        for _ in 0..100 {
            let key = format!("k:{}", random_id());
            let outcome = store.join(ROOM, Some(&key), &random_id()).await;
            ids.push(outcome.expect("join").ticket.id);
        }
    }
    (ids.len() as f64 / start.elapsed().as_secs_f64(), ids)
}

/// Ticket reads over `ids` for [`WINDOW`]; returns polls/s.
async fn polls(store: &dyn Store, ids: &[String]) -> f64 {
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < WINDOW {
        for _ in 0..100 {
            let id = &ids[(done.wrapping_mul(2_654_435_761) % ids.len() as u64) as usize];
            store.ticket(ROOM, id, now_ms()).await.expect("poll");
            done += 1;
        }
    }
    done as f64 / start.elapsed().as_secs_f64()
}

fn durable(dir: &std::path::Path, fsync: FsyncPolicy) -> DurableStore {
    let options = DurableOptions {
        fsync,
        ..DurableOptions::default()
    };
    DurableStore::open(dir, options).expect("data dir")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let waiting: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let temp = tempfile::tempdir().expect("temp dir");
    let mut memory_rates = None;
    for (name, fsync) in [
        ("memory", None),
        ("durable never", Some(FsyncPolicy::Never)),
        ("durable everysec", Some(FsyncPolicy::EverySec)),
        ("durable always", Some(FsyncPolicy::Always)),
    ] {
        let store: Box<dyn Store> = match fsync {
            None => Box::new(MemoryStore::new()),
            Some(fsync) => Box::new(durable(&temp.path().join(name.replace(' ', "-")), fsync)),
        };
        store.init_room(ROOM, &defaults()).await.expect("room");
        let (join_rate, ids) = joins(store.as_ref()).await;
        let poll_rate = polls(store.as_ref(), &ids).await;
        let (base_joins, base_polls) = *memory_rates.get_or_insert((join_rate, poll_rate));
        println!(
            "{name:<17} joins/s {join_rate:>10.0} ({:.2}× memory)   polls/s {poll_rate:>10.0} ({:.2}× memory)",
            join_rate / base_joins,
            poll_rate / base_polls
        );
    }

    // Many waiting: journal size per join, then the two kinds of restart and a snapshot.
    let dir = temp.path().join("big");
    let no_compaction = DurableOptions {
        fsync: FsyncPolicy::EverySec,
        compact_after_bytes: u64::MAX,
    };
    let store = DurableStore::open(&dir, no_compaction).expect("data dir");
    store.init_room(ROOM, &defaults()).await.expect("room");
    for _ in 0..waiting {
        let key = format!("k:{}", random_id());
        store
            .join(ROOM, Some(&key), &random_id())
            .await
            .expect("join");
    }
    let journal = std::fs::metadata(dir.join("journal.log")).map_or(0, |m| m.len());
    drop(store);
    let timed_open = || {
        let start = Instant::now();
        let store = DurableStore::open(&dir, no_compaction).expect("data dir");
        (store, start.elapsed().as_secs_f64())
    };
    let (store, from_journal) = timed_open();
    let start = Instant::now();
    store.compact().expect("snapshot");
    let snapshot_secs = start.elapsed().as_secs_f64();
    let snapshot = std::fs::metadata(dir.join("snapshot.json")).map_or(0, |m| m.len());
    drop(store);
    let (store, from_snapshot) = timed_open();
    let counts = store.counts(ROOM, now_ms()).await.expect("counts");
    assert_eq!(counts.waiting, waiting as u64);
    println!(
        "{waiting} waiting: journal {:.0} B/join; restart replaying the whole journal {from_journal:.2} s; \
         snapshot {:.0} MB written in {snapshot_secs:.2} s; restart from the snapshot {from_snapshot:.2} s \
         (each restart also writes a new snapshot)",
        journal as f64 / waiting as f64,
        snapshot as f64 / 1e6,
    );
}
