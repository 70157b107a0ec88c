//! The durable store's write side: the journal, and the snapshots that keep it short.
//!
//! A snapshot due as the journal grows is written in the background: under the store lock the
//! journal moves to `journal.old` and the rooms are copied (a clone, much cheaper than turning
//! them into JSON), then a thread writes the snapshot from the copy and deletes `journal.old`.
//! Changes wait only for the copy. A start reads `journal.old` (if a crash left it) before
//! `journal.log`; record numbers skip whatever the snapshot already holds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::journal::Journal;
use super::snapshot::Snapshot;
use crate::memory::{lock, MemoryStore};

/// The journal and snapshot files of a data dir, behind the store lock.
#[derive(Debug)]
pub struct Writer {
    /// The journal appended to.
    pub journal: Journal,
    snapshot_path: PathBuf,
    old_journal_path: PathBuf,
    /// A journal write failed: the journal misses a change the engine holds, so no change is
    /// accepted until a snapshot (which holds it) has been written.
    pub failed: bool,
    compact_after_bytes: u64,
    /// Journal size under which no snapshot is tried again (after a failed one).
    retry_at_bytes: u64,
    /// Held by whoever writes the snapshot file, so an older snapshot never replaces a newer one.
    snapshot_file: Arc<Mutex<()>>,
    /// Size of the last snapshot written, bytes.
    snapshot_bytes: Arc<AtomicU64>,
    /// A background snapshot is being written.
    in_flight: Arc<AtomicBool>,
    background: Option<JoinHandle<()>>,
}

impl Writer {
    /// A writer on `journal`, with the snapshot and old journal files of `dir`; the snapshot
    /// there has `snapshot_bytes` (0 = none).
    pub fn new(
        journal: Journal,
        dir: &Path,
        compact_after_bytes: u64,
        snapshot_bytes: u64,
    ) -> Self {
        Self {
            journal,
            snapshot_path: snapshot_path(dir),
            old_journal_path: old_journal_path(dir),
            failed: false,
            compact_after_bytes,
            retry_at_bytes: 0,
            snapshot_file: Arc::default(),
            snapshot_bytes: Arc::new(AtomicU64::new(snapshot_bytes)),
            in_flight: Arc::default(),
            background: None,
        }
    }

    /// Writes a snapshot of `engine` now (after any background one), empties the journal and
    /// deletes an old journal.
    ///
    /// # Errors
    /// Writing the snapshot or emptying the journal failed.
    pub fn snapshot_now(&mut self, engine: &MemoryStore) -> std::io::Result<()> {
        // A background snapshot started earlier must not land after this newer one.
        self.finish_background();
        let _file = lock(&self.snapshot_file);
        let snapshot = Snapshot::of(
            engine.clone_rooms(),
            engine.audit_logs(),
            engine.slug_records(),
            self.journal.last_seq(),
        );
        let bytes = snapshot.write(&self.snapshot_path)?;
        self.snapshot_bytes.store(bytes, Ordering::Relaxed);
        self.journal.reset()?;
        remove_if_there(&self.old_journal_path)
    }

    /// Starts a background snapshot when the journal has outgrown `compact_after_bytes` and the
    /// last snapshot. Never fails: a journal that is not compacted only keeps growing.
    pub fn compact_if_due(&mut self, engine: &MemoryStore) {
        let due_at = self
            .compact_after_bytes
            .max(self.snapshot_bytes.load(Ordering::Relaxed))
            .max(self.retry_at_bytes);
        if self.journal.bytes() < due_at || self.in_flight.load(Ordering::Acquire) {
            return;
        }
        if let Some(done) = self.background.take() {
            let _ = done.join();
        }
        let outcome = if self.old_journal_path.exists() {
            // The last background snapshot failed and its journal is still needed: one now.
            self.snapshot_now(engine)
        } else {
            self.start_background(engine)
        };
        match outcome {
            Ok(()) => self.retry_at_bytes = 0,
            Err(error) => {
                tracing::warn!(%error, path = %self.snapshot_path.display(), "snapshot failed");
                self.retry_at_bytes = self.journal.bytes() + self.compact_after_bytes;
            }
        }
    }

    fn start_background(&mut self, engine: &MemoryStore) -> std::io::Result<()> {
        let last_seq = self.journal.last_seq();
        self.journal.rotate(&self.old_journal_path)?;
        let rooms = engine.clone_rooms();
        let audit = engine.audit_logs();
        let slugs = engine.slug_records();
        let file = self.snapshot_file.clone();
        let (bytes, in_flight) = (self.snapshot_bytes.clone(), self.in_flight.clone());
        let (snapshot_path, old_journal) =
            (self.snapshot_path.clone(), self.old_journal_path.clone());
        in_flight.store(true, Ordering::Release);
        let spawned = std::thread::Builder::new()
            .name("snapshot".into())
            .spawn(move || {
                let _file = lock(&file);
                let written = Snapshot::of(rooms, audit, slugs, last_seq).write(&snapshot_path);
                match written.and_then(|size| {
                    bytes.store(size, Ordering::Relaxed);
                    remove_if_there(&old_journal)
                }) {
                    Ok(()) => tracing::debug!(last_seq, "background snapshot written"),
                    Err(error) => tracing::warn!(
                        %error,
                        "background snapshot failed; the old journal stays until one succeeds"
                    ),
                }
                in_flight.store(false, Ordering::Release);
            });
        match spawned {
            Ok(handle) => {
                self.background = Some(handle);
                Ok(())
            }
            Err(error) => {
                self.in_flight.store(false, Ordering::Release);
                Err(error)
            }
        }
    }

    /// Waits for a background snapshot to finish (before the data dir's lock is let go).
    pub fn finish_background(&mut self) {
        if let Some(handle) = self.background.take() {
            let _ = handle.join();
        }
    }
}

/// `snapshot.json` of a data dir.
pub fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join("snapshot.json")
}

/// `journal.log` of a data dir.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal.log")
}

/// `journal.old` of a data dir: the journal a background snapshot is taking in.
pub fn old_journal_path(dir: &Path) -> PathBuf {
    dir.join("journal.old")
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

impl Drop for super::DurableStore {
    fn drop(&mut self) {
        // Before the data dir's lock goes: a snapshot landing after another process took the
        // dir over would replace that process's newer one.
        crate::memory::lock(&self.writer).finish_background();
    }
}
