//! `DurableStore`: the embedded store that survives a restart (the default without Redis).
//!
//! The [`MemoryStore`] engine serves every call; every call that changes state also appends one
//! record of its inputs and time to a journal before it answers, under one lock so that records
//! are in the order the changes were applied. At start the last snapshot is loaded and the
//! journal replayed on it (room operations take their time from the record, so the replay is
//! exact); then a new snapshot is written and the journal emptied. A snapshot is also written
//! whenever the journal outgrows both `compact_after_bytes` and the last snapshot, so the
//! journal's cost stays proportional to the state, and startup to state + one journal.
//!
//! Files in the data dir: `snapshot.json` (see [`snapshot`]), `journal.log` (see [`journal`]),
//! `lock` (held exclusively while a process uses the dir). What is not kept: scheduler leases
//! and epochs (the process is alone on its dir; its scheduler takes a new lease).
//!
//! - [`change`]: the journal record. - [`journal`]: the file and its line format, fsync policy.
//! - [`snapshot`]: the atomic snapshot file.

pub mod change;
pub mod journal;
pub mod snapshot;

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use fs4::fs_std::FileExt as _;

use self::change::Change;
pub use self::journal::FsyncPolicy;
use self::journal::Journal;
use self::snapshot::Snapshot;
use super::memory::{lock, MemoryStore};
use super::{
    now_ms, AdmitOutcome, AdmitRequest, JoinLimit, JoinReply, LeaseOutcome, LeaveOutcome,
    OrderClaim, QueueCursor, RoomConfig, RoomConfigPatch, RoomCounts, SettingsUpdate, SseRefresh,
    Store, StoreError, TicketRecord, TokenCheck, TokenUse, VersionedConfig,
};

/// How a [`DurableStore`] writes.
#[derive(Debug, Clone, Copy)]
pub struct DurableOptions {
    /// When journal writes reach the disk.
    pub fsync: FsyncPolicy,
    /// Journal size in bytes past which a snapshot is written (when the journal is also larger
    /// than the last snapshot).
    pub compact_after_bytes: u64,
}

impl Default for DurableOptions {
    fn default() -> Self {
        Self {
            fsync: FsyncPolicy::default(),
            compact_after_bytes: 64 << 20,
        }
    }
}

/// Why a data dir could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another process holds the data dir's lock.
    #[error(
        "data dir {dir} is in use by another Vestibule process (it holds {dir}/lock); stop that \
         process or give this one another --data-dir"
    )]
    Locked {
        /// The data dir.
        dir: PathBuf,
    },
    /// The data dir cannot be created, read or written, or its files do not read back.
    #[error("data dir {dir}: {reason}")]
    Unusable {
        /// The data dir.
        dir: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// The journal side of the store, behind one lock.
#[derive(Debug)]
struct Writer {
    journal: Journal,
    snapshot_path: PathBuf,
    /// A journal write failed: the journal misses a change the engine holds, so no change is
    /// accepted until a snapshot (which holds it) has been written.
    failed: bool,
    compact_after_bytes: u64,
    /// Journal size at which the next snapshot is written.
    compact_at_bytes: u64,
}

impl Writer {
    /// Writes a snapshot of `engine` and empties the journal.
    fn snapshot(&mut self, engine: &MemoryStore) -> std::io::Result<()> {
        let bytes = Snapshot::of(engine, self.journal.last_seq()).write(&self.snapshot_path)?;
        self.journal.reset()?;
        self.compact_at_bytes = self.compact_after_bytes.max(bytes);
        Ok(())
    }

    fn compact_if_due(&mut self, engine: &MemoryStore) {
        if self.journal.bytes() < self.compact_at_bytes {
            return;
        }
        if let Err(error) = self.snapshot(engine) {
            // The journal still holds everything: only its growth is unchecked. Try again later.
            tracing::warn!(%error, path = %self.snapshot_path.display(), "snapshot failed");
            self.compact_at_bytes = self.journal.bytes() + self.compact_after_bytes;
        }
    }
}

/// The embedded store, kept in a data dir. See the module docs.
#[derive(Debug)]
pub struct DurableStore {
    engine: MemoryStore,
    writer: Mutex<Writer>,
    dir: PathBuf,
    /// Holds the data dir's lock for as long as the store lives.
    _lock: File,
}

impl DurableStore {
    /// Opens (creating) the data dir `dir`: takes its lock, loads the snapshot, replays the
    /// journal, then writes a fresh snapshot and starts an empty journal.
    ///
    /// # Errors
    /// [`OpenError::Locked`] when another process uses the dir; [`OpenError::Unusable`] when it
    /// cannot be created or written, or its snapshot or journal is damaged (a torn last journal
    /// record is dropped with a warning instead).
    pub fn open(dir: &Path, options: DurableOptions) -> Result<Self, OpenError> {
        let unusable = |reason: String| OpenError::Unusable {
            dir: dir.to_owned(),
            reason,
        };
        std::fs::create_dir_all(dir).map_err(|error| unusable(format!("creating it: {error}")))?;
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))
            .map_err(|error| unusable(format!("opening its lock file: {error}")))?;
        match lock_file.try_lock_exclusive() {
            Ok(true) => {}
            Ok(false) => {
                return Err(OpenError::Locked {
                    dir: dir.to_owned(),
                })
            }
            Err(error) => return Err(unusable(format!("locking it: {error}"))),
        }
        let engine = MemoryStore::new();
        let snapshot_path = dir.join("snapshot.json");
        let journal_path = dir.join("journal.log");
        let mut last_seq = 0;
        if let Some((snapshot, _)) = Snapshot::load(&snapshot_path).map_err(unusable)? {
            last_seq = snapshot.last_seq;
            snapshot.restore(&engine).map_err(unusable)?;
        }
        let report = journal::read(&journal_path, |seq, change| {
            if seq <= last_seq {
                return Ok(());
            }
            change
                .replay(&engine)
                .map_err(|error| format!("journal record {seq}: {error}"))?;
            last_seq = seq;
            Ok(())
        })
        .map_err(unusable)?;
        if report.dropped_tail_bytes > 0 {
            tracing::warn!(
                bytes = report.dropped_tail_bytes,
                path = %journal_path.display(),
                "dropped a torn last journal record (the process stopped mid-write; that change \
                 was never answered)"
            );
        }
        // Emptied only by the snapshot below, once that holds every record replayed here.
        let journal = Journal::open(&journal_path, last_seq + 1, options.fsync)
            .map_err(|error| unusable(format!("opening {}: {error}", journal_path.display())))?;
        let mut writer = Writer {
            journal,
            snapshot_path,
            failed: false,
            compact_after_bytes: options.compact_after_bytes,
            compact_at_bytes: options.compact_after_bytes,
        };
        writer
            .snapshot(&engine)
            .map_err(|error| unusable(format!("writing its snapshot: {error}")))?;
        tracing::info!(
            dir = %dir.display(),
            rooms = engine.room_names().len(),
            replayed = report.records,
            "embedded store recovered from its data dir"
        );
        Ok(Self {
            engine,
            writer: Mutex::new(writer),
            dir: dir.to_owned(),
            _lock: lock_file,
        })
    }

    /// The data dir.
    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    /// Writes a snapshot now and empties the journal (also done on its own as the journal
    /// grows).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the snapshot cannot be written.
    pub fn compact(&self) -> Result<(), StoreError> {
        let mut writer = lock(&self.writer);
        writer
            .snapshot(&self.engine)
            .map_err(|error| StoreError::Unavailable(format!("snapshot failed: {error}")))?;
        writer.failed = false;
        Ok(())
    }

    /// Runs one state-changing call: `apply` changes the engine and says what to journal; the
    /// record is appended before the answer, under the lock that orders all changes.
    fn change<R>(
        &self,
        apply: impl FnOnce(&MemoryStore) -> Result<(R, Option<Change>), StoreError>,
    ) -> Result<R, StoreError> {
        let mut writer = lock(&self.writer);
        if writer.failed {
            writer.snapshot(&self.engine).map_err(|error| {
                StoreError::Unavailable(format!("the data dir cannot be written: {error}"))
            })?;
            writer.failed = false;
            tracing::info!("data dir writable again: snapshot written after a failed write");
        }
        let (reply, change) = apply(&self.engine)?;
        if let Some(change) = change {
            if let Err(error) = writer.journal.append(&change) {
                writer.failed = true;
                tracing::error!(%error, path = %writer.journal.path().display(), "journal write failed");
                // Applied in memory but maybe not on disk: kept only if the process lives on
                // until a snapshot succeeds.
                return Err(StoreError::OutcomeUnknown(format!(
                    "journal write failed: {error}"
                )));
            }
            writer.compact_if_due(&self.engine);
        }
        Ok(reply)
    }
}

#[async_trait]
impl Store for DurableStore {
    fn kind(&self) -> &'static str {
        "durable"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        if lock(&self.writer).failed {
            return Err(StoreError::Unavailable(
                "the last journal write failed".into(),
            ));
        }
        Ok(())
    }

    async fn init_room(
        &self,
        room: &str,
        defaults: &RoomConfig,
    ) -> Result<VersionedConfig, StoreError> {
        self.change(|engine| {
            let (in_force, created) = engine.create_room(room, defaults);
            let change = created.then(|| Change::InitRoom {
                room: room.to_owned(),
                defaults: defaults.clone(),
            });
            Ok((in_force, change))
        })
    }

    async fn room_settings(&self, room: &str) -> Result<VersionedConfig, StoreError> {
        self.engine.room_settings(room).await
    }

    async fn update_room(
        &self,
        room: &str,
        patch: &RoomConfigPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        self.change(|engine| {
            let update = engine.with_room(room, |state| state.update(patch, expected_version))?;
            let change = match &update {
                SettingsUpdate::Applied(in_force) => Some(Change::UpdateRoom {
                    room: room.to_owned(),
                    config: in_force.config.clone(),
                }),
                SettingsUpdate::VersionMismatch(_) => None,
            };
            Ok((update, change))
        })
    }

    async fn join_with_limit(
        &self,
        room: &str,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
    ) -> Result<JoinReply, StoreError> {
        self.change(|engine| {
            let now = now_ms();
            let reply =
                engine.with_room(room, |state| state.join(dedup_key, new_id, limit, now))?;
            let created = matches!(&reply, JoinReply::Joined(outcome) if outcome.created);
            let change = created.then(|| Change::Join {
                room: room.to_owned(),
                key: dedup_key.map(str::to_owned),
                id: new_id.to_owned(),
                limit: limit.cloned(),
                now_ms: now,
            });
            Ok((reply, change))
        })
    }

    async fn ticket(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.engine.ticket(room, id, now_ms).await
    }

    async fn sse_refresh(
        &self,
        room: &str,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        self.engine.sse_refresh(room, since, ids, now_ms).await
    }

    async fn leave(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        self.change(|engine| {
            let outcome = engine.with_room(room, |state| state.leave(id, now_ms, keep_ms))?;
            let change = (outcome == LeaveOutcome::Left).then(|| Change::Leave {
                room: room.to_owned(),
                id: id.to_owned(),
                now_ms,
                keep_ms,
            });
            Ok((outcome, change))
        })
    }

    async fn counts(&self, room: &str, now_ms: u64) -> Result<RoomCounts, StoreError> {
        self.engine.counts(room, now_ms).await
    }

    async fn lease(
        &self,
        room: &str,
        holder: &str,
        lease_ms: u64,
        defaults: &RoomConfig,
    ) -> Result<LeaseOutcome, StoreError> {
        self.engine.lease(room, holder, lease_ms, defaults).await
    }

    async fn release_lease(&self, room: &str, holder: &str) -> Result<(), StoreError> {
        self.engine.release_lease(room, holder).await
    }

    async fn admit(
        &self,
        room: &str,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        self.change(|engine| {
            let clock = now_ms();
            let outcome = engine.with_room(room, |state| state.admit(request, clock))?;
            // Expiring and forgetting depend only on the time, so a tick that admitted nobody
            // changed nothing the next recorded tick would not redo.
            let change = (outcome.admitted > 0).then(|| Change::Admit {
                room: room.to_owned(),
                now_ms: request.now_ms,
                token_ttl_ms: request.token_ttl_ms,
                keep_ms: request.keep_ms,
                max_active_users: request.max_active_users,
                tokens: request
                    .tokens
                    .iter()
                    .take(outcome.admitted as usize)
                    .cloned()
                    .collect(),
            });
            Ok((outcome, change))
        })
    }

    async fn check_token(
        &self,
        room: &str,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        self.engine.check_token(room, token, now_ms).await
    }

    async fn consume_token(
        &self,
        room: &str,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        self.change(|engine| {
            let used = engine.with_room(room, |state| {
                state.consume_token(token, order, now_ms, keep_ms)
            })?;
            let change = matches!(used, TokenUse::Consumed { .. }).then(|| Change::ConsumeToken {
                room: room.to_owned(),
                token: token.to_owned(),
                key: order.idempotency_key.map(str::to_owned),
                receipt: order.receipt.to_owned(),
                now_ms,
                keep_ms,
            });
            Ok((used, change))
        })
    }
}
