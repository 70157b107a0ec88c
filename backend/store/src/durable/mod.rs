//! `DurableStore`: the embedded store that survives a restart (the default without Redis).
//!
//! The [`MemoryStore`] engine serves every call; every call that changes state also appends one
//! record of its inputs and time to a journal before it answers, under one lock so that records
//! are in the order the changes were applied. At start the last snapshot is loaded and the
//! journal replayed on it (room operations take their time from the record, so the replay is
//! exact). Whenever the journal outgrows both `compact_after_bytes` and the last snapshot, a
//! snapshot is written in the background and the journal starts over (see [`writer`]), so the
//! journal's size stays proportional to the state, and so does a start.
//!
//! Files in the data dir: `snapshot.json` (see [`snapshot`]), `journal.log` (see [`journal`]),
//! `journal.old` (only while a snapshot is written), `lock` (held exclusively while a process
//! uses the dir). What is not kept: scheduler leases and epochs (the process is alone on its
//! dir; its scheduler takes a new lease).
//!
//! - [`change`]: the journal record. - [`journal`]: the file and its line format, fsync policy.
//! - [`snapshot`]: the atomic snapshot file. - [`writer`]: journal + snapshots, in the background.
//! - [`options`]: how the store writes, and why a data dir could not be opened.

mod catalog;
pub mod change;
mod draw;
pub mod journal;
pub mod options;
pub mod snapshot;
pub mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::runtime::RuntimeFlavor;

use self::change::{Change, InstantJoin};
pub use self::journal::FsyncPolicy;
use self::journal::Journal;
pub use self::options::{DurableOptions, OpenError};
use self::snapshot::Snapshot;
use self::writer::{journal_path, old_journal_path, snapshot_path, Writer};
use super::memory::{lock, MemoryStore};
use super::{
    now_ms, AdmitOutcome, AdmitRequest, DrawOutcome, DrawRecord, DrawRequest, InstantAdmission,
    JoinLimit, JoinReply, LeaseOutcome, LeaveOutcome, OrderClaim, PollAnchor, QueueCursor,
    RoomCounts, RoomId, SettingsPatch, SettingsUpdate, SseRefresh, Store, StoreError, TicketRecord,
    TokenCheck, TokenUse, VersionedSettings,
};

/// The embedded store, kept in a data dir. See the module docs.
#[derive(Debug)]
pub struct DurableStore {
    engine: MemoryStore,
    writer: Mutex<Writer>,
    dir: PathBuf,
    /// Every change waits for the disk (`FsyncPolicy::Always`).
    syncs_each_change: bool,
    /// Holds the data dir's lock for as long as the store lives.
    _lock: File,
}

impl DurableStore {
    /// Opens (creating) the data dir `dir`: takes its lock, loads the snapshot and replays the
    /// journal on it; appending goes on after the journal's last good record.
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
        let lock_file = options::lock_dir(dir)?;
        let engine = MemoryStore::new();
        let (mut last_seq, mut snapshot_bytes) = (0, 0);
        if let Some((snapshot, bytes)) = Snapshot::load(&snapshot_path(dir)).map_err(unusable)? {
            (last_seq, snapshot_bytes) = (snapshot.last_seq, bytes);
            snapshot.restore(&engine).map_err(unusable)?;
        }
        let old_journal = old_journal_path(dir);
        let mut replayed = 0;
        let mut good_bytes = 0;
        // A crash during a background snapshot leaves the journal it was taking in: it comes
        // first.
        for path in [old_journal.clone(), journal_path(dir)] {
            let report = journal::read(&path, |seq, change| {
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
                    path = %path.display(),
                    "dropped a torn last journal record (the process stopped mid-write; that \
                     change was never answered)"
                );
            }
            replayed += report.records;
            good_bytes = report.good_bytes;
        }
        let journal = Journal::open(&journal_path(dir), last_seq + 1, good_bytes, options.fsync)
            .map_err(|error| unusable(format!("opening its journal: {error}")))?;
        let mut writer = Writer::new(journal, dir, options.compact_after_bytes, snapshot_bytes);
        if old_journal.exists() {
            writer
                .snapshot_now(&engine)
                .map_err(|error| unusable(format!("writing its snapshot: {error}")))?;
        }
        // Last-heard times are not kept: nobody is skipped for the time the process was down.
        for room in engine.room_names() {
            let _ = engine.with_live_room(&room, |state| state.presume_present(now_ms()));
        }
        tracing::info!(
            dir = %dir.display(),
            rooms = engine.room_names().len(),
            replayed,
            "embedded store recovered from its data dir"
        );
        Ok(Self {
            engine,
            writer: Mutex::new(writer),
            dir: dir.to_owned(),
            syncs_each_change: options.fsync == FsyncPolicy::Always,
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
            .snapshot_now(&self.engine)
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
        // A change that waits for the disk (milliseconds) would hold an async worker and every
        // request queued on it: on a multi-threaded runtime, hand those to another worker first.
        let multi_threaded = tokio::runtime::Handle::try_current()
            .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::MultiThread);
        if self.syncs_each_change && multi_threaded {
            tokio::task::block_in_place(|| self.change_now(apply))
        } else {
            self.change_now(apply)
        }
    }

    fn change_now<R>(
        &self,
        apply: impl FnOnce(&MemoryStore) -> Result<(R, Option<Change>), StoreError>,
    ) -> Result<R, StoreError> {
        let mut writer = lock(&self.writer);
        if writer.failed {
            writer.snapshot_now(&self.engine).map_err(|error| {
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

    async fn update_room(
        &self,
        room: RoomId<'_>,
        _base: &VersionedSettings,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        self.change(|engine| {
            let update = engine.with_room(room, |state| {
                state.update(patch, expected_version, || engine.next_count(room.slug))
            })?;
            let change = match &update {
                SettingsUpdate::Applied(in_force) => Some(Change::UpdateRoom {
                    room: room.slug.to_owned(),
                    config: in_force.settings.clone(),
                }),
                SettingsUpdate::VersionMismatch(_) => None,
            };
            Ok((update, change))
        })
    }

    async fn join_with_limit(
        &self,
        room: RoomId<'_>,
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
                room: room.slug.to_owned(),
                key: dedup_key.map(str::to_owned),
                id: new_id.to_owned(),
                limit: limit.cloned(),
                now_ms: now,
                instant: None,
            });
            Ok((reply, change))
        })
    }

    async fn join_prequeue(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        settings_version: Option<u64>,
    ) -> Result<JoinReply, StoreError> {
        self.join_prequeue_kept(room, dedup_key, new_id, limit, settings_version)
    }

    async fn draw_seed(&self, room: RoomId<'_>, seed: &str) -> Result<DrawRecord, StoreError> {
        self.draw_seed_kept(room, seed)
    }

    async fn draw_record(&self, room: RoomId<'_>) -> Result<Option<DrawRecord>, StoreError> {
        self.engine.draw_record(room).await
    }

    async fn draw_tags(
        &self,
        room: RoomId<'_>,
        from: u64,
        n: u64,
    ) -> Result<Vec<String>, StoreError> {
        self.engine.draw_tags(room, from, n).await
    }

    async fn keyed_ticket(
        &self,
        room: RoomId<'_>,
        key: &str,
        now: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.engine.keyed_ticket(room, key, now).await
    }

    async fn prequeue_ids(&self, room: RoomId<'_>) -> Result<Vec<String>, StoreError> {
        self.engine.prequeue_ids(room).await
    }

    async fn draw(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
    ) -> Result<DrawOutcome, StoreError> {
        self.draw_kept(room, request)
    }

    async fn join_admitting(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        instant: &InstantAdmission,
    ) -> Result<JoinReply, StoreError> {
        self.change(|engine| {
            let (reply, admitted) = engine.with_room(room, |state| {
                state.join_admitting(dedup_key, new_id, limit, instant)
            })?;
            let created = matches!(&reply, JoinReply::Joined(outcome) if outcome.created);
            let change = created.then(|| Change::Join {
                room: room.slug.to_owned(),
                key: dedup_key.map(str::to_owned),
                id: new_id.to_owned(),
                limit: limit.cloned(),
                now_ms: instant.now_ms,
                instant: admitted.then(|| InstantJoin {
                    token: instant.token.clone(),
                    token_ttl_ms: instant.token_ttl_ms,
                    keep_ms: instant.keep_ms,
                }),
            });
            Ok((reply, change))
        })
    }

    async fn ticket(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.engine.ticket(room, id, now_ms).await
    }

    async fn hear(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        now_ms: u64,
        _positions: bool,
    ) -> Result<Vec<Option<TicketRecord>>, StoreError> {
        // Last-heard times are not journaled; only a return to the line is a change. Without a
        // held ticket among `ids` (checked under the room's lock) no writer lock is taken.
        let quick = self.engine.with_room(room, |state| {
            let any_held = ids.iter().any(|id| state.is_held(id));
            (!any_held).then(|| state.hear(ids, now_ms).0)
        })?;
        if let Some(records) = quick {
            return Ok(records);
        }
        self.change(|engine| {
            let (records, ids) = engine.with_room(room, |state| state.hear(ids, now_ms))?;
            let change = (!ids.is_empty()).then(|| Change::Return {
                room: room.slug.to_owned(),
                ids,
                now_ms,
            });
            Ok((records, change))
        })
    }

    async fn hear_polled(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
        // As `hear`: a ticket that is not held changes nothing the journal keeps, so it is read
        // with its anchor under one lock; a held one comes back through the journal (no anchor:
        // the next poll gets one).
        let ids = [id.to_owned()];
        let quick = self.engine.with_room(room, |state| {
            (!state.is_held(id)).then(|| {
                let record = state.hear(&ids, now_ms).0.pop().flatten();
                record.map(|record| (record, state.poll_anchor(id)))
            })
        })?;
        if let Some(read) = quick {
            return Ok(read);
        }
        super::hear_unanchored(self, room, id, now_ms).await
    }

    async fn sse_refresh(
        &self,
        room: RoomId<'_>,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        self.engine.sse_refresh(room, since, ids, now_ms).await
    }

    async fn leave(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        self.change(|engine| {
            let outcome = engine.with_room(room, |state| state.leave(id, now_ms, keep_ms))?;
            let change = (outcome == LeaveOutcome::Left).then(|| Change::Leave {
                room: room.slug.to_owned(),
                id: id.to_owned(),
                now_ms,
                keep_ms,
            });
            Ok((outcome, change))
        })
    }

    async fn counts(&self, room: RoomId<'_>, now_ms: u64) -> Result<RoomCounts, StoreError> {
        self.engine.counts(room, now_ms).await
    }

    async fn lease(
        &self,
        room: RoomId<'_>,
        holder: &str,
        lease_ms: u64,
    ) -> Result<LeaseOutcome, StoreError> {
        self.engine.lease(room, holder, lease_ms).await
    }

    async fn release_lease(&self, room: RoomId<'_>, holder: &str) -> Result<(), StoreError> {
        self.engine.release_lease(room, holder).await
    }

    async fn admit(
        &self,
        room: RoomId<'_>,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        self.change(|engine| {
            let clock = now_ms();
            let (outcome, skipped) =
                engine.with_room(room, |state| state.admit_with_skips(request, clock))?;
            // Expiring and forgetting depend only on the time, so a tick that admitted and
            // skipped nobody changed nothing the next recorded tick would not redo.
            let recorded = outcome.admitted > 0 || !skipped.is_empty();
            let change = recorded.then(|| Change::Admit {
                room: room.slug.to_owned(),
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
                skipped,
                hold_place_ms: request.hold_place_ms,
            });
            Ok((outcome, change))
        })
    }

    /// Not journaled: the embedded store's challenge key lives in this process only, so a
    /// challenge from before a restart never verifies again.
    async fn use_challenge(
        &self,
        room: RoomId<'_>,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.engine
            .use_challenge(room, id, expires_at_ms, now_ms)
            .await
    }

    async fn check_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        self.engine.check_token(room, token, now_ms).await
    }

    async fn consume_token(
        &self,
        room: RoomId<'_>,
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
                room: room.slug.to_owned(),
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
