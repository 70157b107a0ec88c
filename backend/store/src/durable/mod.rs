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

mod admission;
mod catalog;
pub mod change;
mod draw;
mod figures;
pub mod journal;
pub mod options;
mod presence;
mod queue;
pub mod snapshot;
pub mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::runtime::RuntimeFlavor;

use self::change::Change;
pub use self::journal::FsyncPolicy;
use self::journal::Journal;
pub use self::options::{DurableOptions, OpenError};
use self::snapshot::Snapshot;
use self::writer::{journal_path, old_journal_path, snapshot_path, Writer};
use super::memory::{lock, MemoryStore};
use super::{now_ms, Store, StoreError, StoreOptions};

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
        let found_snapshot = snapshot_bytes > 0 || last_seq > 0;
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
        if found_snapshot || replayed > 0 {
            tracing::info!(
                dir = %dir.display(),
                rooms = engine.room_names().len(),
                replayed,
                "embedded store recovered from its data dir"
            );
        } else {
            tracing::info!(dir = %dir.display(), "embedded store in a new data dir");
        }
        Ok(Self {
            engine,
            writer: Mutex::new(writer),
            dir: dir.to_owned(),
            syncs_each_change: options.fsync == FsyncPolicy::Always,
            _lock: lock_file,
        })
    }

    /// The same store with `options` (set before it is shared).
    #[must_use]
    pub fn with_options(mut self, options: StoreOptions) -> Self {
        self.engine.set_options(options);
        self
    }

    /// The options it was built with.
    fn options(&self) -> &StoreOptions {
        self.engine.options()
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
}
