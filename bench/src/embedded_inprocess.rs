//! The embedded store driven in-process through the `Store` trait (one caller, no HTTP): what a
//! journaled change costs against the memory-only engine, and what a snapshot and a restart take
//! with many tickets waiting.

use std::path::Path;
use std::time::{Duration, Instant};

use vestibule::ids::random_id;
use vestibule::store::durable::{DurableOptions, DurableStore, FsyncPolicy};
use vestibule::store::memory::MemoryStore;
use vestibule::store::{now_ms, Catalog, JoinRequest, Queue, RoomId, Settings, Store};

const ROOM: &str = "main";

/// One mode's store-call rates.
pub struct CallRates {
    /// `memory`, `durable never`, …
    pub mode: &'static str,
    /// Keyed joins per second.
    pub joins_per_sec: f64,
    /// Ticket reads per second.
    pub polls_per_sec: f64,
}

/// Snapshot and restart figures with `waiting` tickets.
pub struct RestartCost {
    /// Tickets waiting.
    pub waiting: u64,
    /// Journal bytes per keyed join.
    pub journal_bytes_per_join: f64,
    /// Restart that replays a journal of every join, seconds (no snapshot since).
    pub from_journal_secs: f64,
    /// Writing a snapshot under the store lock (`compact`), seconds.
    pub snapshot_secs: f64,
    /// The change that starts a background snapshot: how long it waits (rename + clone), s.
    pub background_stall_secs: f64,
    /// How long the background snapshot then takes, seconds.
    pub background_secs: f64,
    /// Snapshot size, bytes.
    pub snapshot_bytes: u64,
    /// Restart from that snapshot, seconds.
    pub from_snapshot_secs: f64,
}

fn defaults() -> Settings {
    Settings {
        admission_rate_per_sec: 0.0,
        paused: false,
        token_ttl_ms: 60_000,
        max_active_users: None,
        checkout_url: None,
        share_token_with_embedder: false,
        abandon_after_ms: vestibule::store::default_abandon_after_ms(),
        hold_place_ms: vestibule::store::default_hold_place_ms(),
        expected_checkout_ms: None,
        sale: Default::default(),
        labels: Default::default(),
        queueing_method: Default::default(),
        auto_rate: None,
        opens_at_ms: None,
        prequeue_opens_at_ms: None,
        pow_difficulty: 0,
        pow_auto_joins_per_sec: None,
        require_user_assertion: false,
    }
}

fn open(dir: &Path, fsync: FsyncPolicy, compact_after_bytes: u64) -> anyhow::Result<DurableStore> {
    let options = DurableOptions {
        fsync,
        compact_after_bytes,
    };
    Ok(DurableStore::open(dir, options)?)
}

async fn keyed_join(store: &dyn Store, room: RoomId<'_>) -> anyhow::Result<String> {
    let key = format!("k:{}", random_id());
    let id = random_id();
    let request = JoinRequest::new(&id).keyed(Some(&key));
    Ok(store.join(room, &request).await?.joined()?.ticket.id)
}

/// Tickets the polls cycle through in every mode (the same work whatever the join rate was).
const POLLED: usize = 2_000;

/// Joins then polls for `window` each, on memory and on the durable store with each fsync
/// policy, one after the other.
///
/// # Errors
/// A store that cannot open or answer.
pub async fn call_rates(scratch: &Path, window: Duration) -> anyhow::Result<Vec<CallRates>> {
    let mut rates = Vec::new();
    for (mode, fsync) in [
        ("memory", None),
        ("durable never", Some(FsyncPolicy::Never)),
        ("durable everysec", Some(FsyncPolicy::EverySec)),
        ("durable always", Some(FsyncPolicy::Always)),
    ] {
        let store: Box<dyn Store> = match fsync {
            None => Box::new(MemoryStore::new()),
            Some(fsync) => Box::new(open(
                &scratch.join(mode.replace(' ', "-")),
                fsync,
                64 << 20,
            )?),
        };
        let generation = store.seed_room(ROOM, &defaults()).await?.generation;
        let room = RoomId::new(ROOM, generation);
        let start = Instant::now();
        let mut ids = Vec::new();
        while start.elapsed() < window {
            for _ in 0..64 {
                ids.push(keyed_join(store.as_ref(), room).await?);
            }
        }
        let joins_per_sec = ids.len() as f64 / start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut polls = 0u64;
        while start.elapsed() < window {
            for _ in 0..64 {
                let polled = ids.len().min(POLLED) as u64;
                let id = &ids[(polls.wrapping_mul(2_654_435_761) % polled) as usize];
                store.ticket(room, id, now_ms()).await?;
                polls += 1;
            }
        }
        rates.push(CallRates {
            mode,
            joins_per_sec,
            polls_per_sec: polls as f64 / start.elapsed().as_secs_f64(),
        });
    }
    Ok(rates)
}

/// Loads `waiting` keyed joins with no snapshot on the way, then times a restart that replays
/// them all, a background snapshot (what the change that starts it waits, and how long it
/// runs), a restart from that snapshot, and a snapshot under the lock.
///
/// # Errors
/// A store that cannot open or answer.
pub async fn restart_cost(scratch: &Path, waiting: u64) -> anyhow::Result<RestartCost> {
    let dir = scratch.join("restart");
    let fsync = FsyncPolicy::EverySec;
    let store = open(&dir, fsync, u64::MAX)?;
    let generation = store.seed_room(ROOM, &defaults()).await?.generation;
    let room = RoomId::new(ROOM, generation);
    for _ in 0..waiting {
        keyed_join(&store, room).await?;
    }
    let journal_bytes = std::fs::metadata(dir.join("journal.log"))?.len();
    drop(store);
    // No snapshot yet and a compaction due at once: the first change starts one in the
    // background; closing the store waits for it.
    let start = Instant::now();
    let store = open(&dir, fsync, 1)?;
    let from_journal_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    keyed_join(&store, room).await?;
    let background_stall_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    drop(store);
    let background_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let store = open(&dir, fsync, u64::MAX)?;
    let from_snapshot_secs = start.elapsed().as_secs_f64();
    let kept = store.counts(room, now_ms()).await?.waiting;
    anyhow::ensure!(
        kept == waiting + 1,
        "{kept} of {waiting} + 1 waiting after restarts"
    );
    let start = Instant::now();
    store.compact()?;
    let snapshot_secs = start.elapsed().as_secs_f64();
    let snapshot_bytes = std::fs::metadata(dir.join("snapshot.json"))?.len();
    drop(store);
    Ok(RestartCost {
        waiting,
        journal_bytes_per_join: journal_bytes as f64 / waiting.max(1) as f64,
        from_journal_secs,
        snapshot_secs,
        snapshot_bytes,
        from_snapshot_secs,
        background_stall_secs,
        background_secs,
    })
}
