//! How a [`DurableStore`](super::DurableStore) writes ([`DurableOptions`]) and why its data dir
//! could not be opened ([`OpenError`]).

use std::path::PathBuf;

use super::journal::FsyncPolicy;

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

/// Creates `dir` (and its parents) if missing; a new data dir is readable by its owner only,
/// since its files hold ticket ids and entry tokens, which are bearer secrets.
pub(super) fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates (if needed) and locks the data dir `dir` for this process; the lock holds while the
/// returned file stays open.
///
/// # Errors
/// [`OpenError::Locked`] when another process holds it; [`OpenError::Unusable`] when it cannot
/// be created, opened or locked.
pub fn lock_dir(dir: &std::path::Path) -> Result<std::fs::File, OpenError> {
    let unusable = |reason: String| OpenError::Unusable {
        dir: dir.to_owned(),
        reason,
    };
    create_private_dir(dir).map_err(|error| unusable(format!("creating it: {error}")))?;
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("lock"))
        .map_err(|error| unusable(format!("opening its lock file: {error}")))?;
    // A lock let go a moment ago can still be held for a few milliseconds by a child that a
    // thread of the releasing process forked before its `exec` closed the inherited descriptor
    // (seen once in the tests, which start Redis servers while a store reopens its dir): the
    // lock is tried for up to LOCK_WAIT before the dir counts as another process's.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match fs4::fs_std::FileExt::try_lock_exclusive(&lock_file) {
            Ok(true) => return Ok(lock_file),
            Ok(false) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Ok(false) => {
                return Err(OpenError::Locked {
                    dir: dir.to_owned(),
                })
            }
            Err(error) => return Err(unusable(format!("locking it: {error}"))),
        }
    }
}

/// How long [`lock_dir`] tries a data dir's lock before reporting it taken.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(500);
