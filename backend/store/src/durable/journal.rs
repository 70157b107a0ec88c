//! The append-only journal: one line per [`Change`], written before the call answers.
//!
//! A line is `<crc32 of the rest, 8 hex digits> <sequence number> <JSON change>\n`. Sequence
//! numbers grow by one per change and never restart; a snapshot names the last one it contains,
//! so a journal that a crash left behind next to a newer snapshot is replayed only past it.
//!
//! Each line goes out in one `write(2)`: once that returns, the line is in the kernel's page
//! cache and survives the process being killed (even `kill -9`). Surviving a power loss needs
//! the data on disk, which is what [`FsyncPolicy`] chooses.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::change::Change;

/// When journal writes reach the disk (`--data-fsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// `fdatasync` after every change, before it answers: a power loss loses nothing answered;
    /// every change waits for the disk.
    Always,
    /// `fdatasync` once a second on a background thread: a power loss loses at most about the
    /// last second; a killed process loses nothing answered.
    #[default]
    EverySec,
    /// Never: the kernel writes back when it likes (typically within 30 s); a killed process
    /// still loses nothing answered.
    Never,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "always" => Ok(Self::Always),
            "everysec" => Ok(Self::EverySec),
            "never" => Ok(Self::Never),
            other => Err(format!("{other:?} is not always, everysec or never")),
        }
    }
}

/// The journal file, open for appending.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    /// Sequence number of the next change.
    next_seq: u64,
    /// Bytes in the file.
    bytes: u64,
    fsync: FsyncPolicy,
    /// Set by writes, cleared by the background syncer (`EverySec`).
    dirty: Arc<AtomicBool>,
    /// The file the background syncer syncs (a handle on the current file).
    synced: Arc<Mutex<File>>,
    /// Tells the background syncer to stop.
    stop: Arc<AtomicBool>,
    line: Vec<u8>,
}

impl Journal {
    /// Opens (creating) the journal at `path` for appending, continuing at sequence `next_seq`,
    /// cut to its first `keep_bytes` (what [`read`] found good: a torn last record goes).
    ///
    /// # Errors
    /// The file cannot be opened, cut or cloned for the syncer.
    pub fn open(
        path: &Path,
        next_seq: u64,
        keep_bytes: u64,
        fsync: FsyncPolicy,
    ) -> std::io::Result<Self> {
        let file = open_append(path)?;
        if file.metadata()?.len() > keep_bytes {
            file.set_len(keep_bytes)?;
            file.sync_all()?;
        }
        let bytes = file.metadata()?.len();
        let journal = Self {
            synced: Arc::new(Mutex::new(file.try_clone()?)),
            file,
            path: path.to_owned(),
            next_seq,
            bytes,
            fsync,
            dirty: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            line: Vec::with_capacity(512),
        };
        if fsync == FsyncPolicy::EverySec {
            journal.spawn_syncer()?;
        }
        Ok(journal)
    }

    fn spawn_syncer(&self) -> std::io::Result<()> {
        let file = self.synced.clone();
        let (dirty, stop) = (self.dirty.clone(), self.stop.clone());
        std::thread::Builder::new()
            .name("journal-fsync".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_secs(1));
                    if dirty.swap(false, Ordering::Relaxed) {
                        let file = file.lock().unwrap_or_else(|p| p.into_inner());
                        if let Err(error) = file.sync_data() {
                            tracing::warn!(%error, "journal fsync failed");
                        }
                    }
                }
            })?;
        Ok(())
    }

    /// Appends `change` as the next record, in one write.
    ///
    /// The sequence number is used up even when the write fails, so that a record that reached
    /// the file despite the error is never replayed on top of a snapshot that already holds it.
    ///
    /// # Errors
    /// The write (or, with [`FsyncPolicy::Always`], the sync) failed: the record may be missing
    /// or torn.
    pub fn append(&mut self, change: &Change) -> std::io::Result<()> {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.line.clear();
        self.line.extend_from_slice(b"00000000 ");
        let body_start = self.line.len();
        write!(self.line, "{seq} ")?;
        serde_json::to_writer(&mut self.line, change)?;
        let crc = crc32fast::hash(&self.line[body_start..]);
        self.line[..8].copy_from_slice(format!("{crc:08x}").as_bytes());
        self.line.push(b'\n');
        self.file.write_all(&self.line)?;
        self.bytes += self.line.len() as u64;
        match self.fsync {
            FsyncPolicy::Always => self.file.sync_data()?,
            FsyncPolicy::EverySec => self.dirty.store(true, Ordering::Relaxed),
            FsyncPolicy::Never => {}
        }
        Ok(())
    }

    /// Moves the current file to `old` (synced, whole) and goes on in a new, empty file, so that
    /// a snapshot of everything so far can be written while changes go on; `old` is deleted
    /// once the snapshot holds it.
    ///
    /// # Errors
    /// Syncing, renaming or opening failed; the journal then goes on in the file it had, unless
    /// the rename happened (the new file is then opened at `path` or the error is returned with
    /// both files in place, which a start reads in order).
    pub fn rotate(&mut self, old: &Path) -> std::io::Result<()> {
        self.file.sync_data()?;
        std::fs::rename(&self.path, old)?;
        let file = open_append(&self.path)?;
        if let Some(folder) = self.path.parent() {
            File::open(folder)?.sync_all()?;
        }
        *self.synced.lock().unwrap_or_else(|p| p.into_inner()) = file.try_clone()?;
        self.file = file;
        self.bytes = 0;
        Ok(())
    }

    /// Empties the file (after a snapshot took in every record), and syncs that.
    ///
    /// # Errors
    /// Truncating or syncing failed.
    pub fn reset(&mut self) -> std::io::Result<()> {
        // Opened again by path: after a failed rotation the handle may be on the moved file.
        let file = open_append(&self.path)?;
        file.set_len(0)?;
        file.sync_all()?;
        *self.synced.lock().unwrap_or_else(|p| p.into_inner()) = file.try_clone()?;
        self.file = file;
        self.bytes = 0;
        Ok(())
    }

    /// Sequence number of the last record handed to [`Journal::append`] (0 = none ever).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Bytes in the file now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The file's path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if self.dirty.load(Ordering::Relaxed) {
            let _ = self.file.sync_data();
        }
    }
}

/// What reading a journal found besides its records.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Records read (including those skipped as already in the snapshot).
    pub records: u64,
    /// Bytes of a torn last record that were dropped (a crash mid-write), 0 = none.
    pub dropped_tail_bytes: u64,
    /// The last sequence number read.
    pub last_seq: u64,
    /// Bytes up to the end of the last good record (where appending goes on).
    pub good_bytes: u64,
}

/// Reads the journal at `path` (missing = empty) and hands every well-formed record to `apply`,
/// in order, with its sequence number.
///
/// A bad last record (no newline, wrong checksum, unreadable) is what a crash in the middle of a
/// write leaves: it is dropped and reported. A bad record followed by good ones is damage, not
/// a crash, and stops the read.
///
/// # Errors
/// A reason naming the byte offset of damage, an I/O error, or the first error of `apply`.
pub fn read(
    path: &Path,
    mut apply: impl FnMut(u64, Change) -> Result<(), String>,
) -> Result<ReadReport, String> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(ReadReport::default())
        }
        Err(error) => return Err(format!("reading {}: {error}", path.display())),
    };
    let mut reader = BufReader::new(file);
    let mut report = ReadReport::default();
    let mut offset = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|error| format!("reading {}: {error}", path.display()))?;
        if read == 0 {
            return Ok(report);
        }
        match parse_line(&line) {
            Some((seq, change)) => {
                apply(seq, change)?;
                report.records += 1;
                report.last_seq = seq;
                report.good_bytes = offset + read as u64;
            }
            None => {
                let at_end = reader.fill_buf().map_or(true, |rest| rest.is_empty());
                if at_end {
                    report.dropped_tail_bytes = read as u64;
                    return Ok(report);
                }
                return Err(format!(
                    "{} is damaged at byte {offset}: a record that is not the last one does not \
                     read back (move the data dir aside to start empty)",
                    path.display()
                ));
            }
        }
        offset += read as u64;
    }
}

/// One line back into its record; `None` when it is torn or damaged.
fn parse_line(line: &[u8]) -> Option<(u64, Change)> {
    let line = line.strip_suffix(b"\n")?;
    let (crc, body) = (line.get(..8)?, line.get(9..)?);
    let crc = u32::from_str_radix(std::str::from_utf8(crc).ok()?, 16).ok()?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    let body = std::str::from_utf8(body).ok()?;
    let (seq, json) = body.split_once(' ')?;
    Some((seq.parse().ok()?, serde_json::from_str(json).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leave(n: u64) -> Change {
        Change::Leave {
            room: "main".into(),
            id: format!("ticket-{n}"),
            now_ms: n,
            keep_ms: 1,
        }
    }

    fn read_all(path: &Path) -> Result<(Vec<(u64, Change)>, ReadReport), String> {
        let mut records = Vec::new();
        let report = read(path, |seq, change| {
            records.push((seq, change));
            Ok(())
        })?;
        Ok((records, report))
    }

    #[test]
    fn records_read_back_in_order_and_a_torn_last_record_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let mut journal = Journal::open(&path, 5, 0, FsyncPolicy::Never).unwrap();
        for n in 0..3 {
            journal.append(&leave(n)).unwrap();
        }
        assert_eq!(journal.last_seq(), 7);
        let (records, report) = read_all(&path).unwrap();
        assert_eq!(records, vec![(5, leave(0)), (6, leave(1)), (7, leave(2))]);
        assert_eq!(report.dropped_tail_bytes, 0);
        assert_eq!(report.good_bytes, journal.bytes());

        // A crash mid-write: half a record at the end.
        let whole = std::fs::read(&path).unwrap();
        let torn = &whole[..whole.len() - 10];
        std::fs::write(&path, torn).unwrap();
        let (records, report) = read_all(&path).unwrap();
        assert_eq!(records.len(), 2);
        assert!(report.dropped_tail_bytes > 0);
        assert_eq!(report.last_seq, 6);
        // Reopened, the torn record is cut off and appending goes on after the good ones.
        drop(journal);
        let mut journal = Journal::open(&path, 8, report.good_bytes, FsyncPolicy::Never).unwrap();
        journal.append(&leave(9)).unwrap();
        let (records, report) = read_all(&path).unwrap();
        assert_eq!(records.last(), Some(&(8, leave(9))));
        assert_eq!((records.len(), report.dropped_tail_bytes), (3, 0));
    }

    #[test]
    fn a_damaged_record_in_the_middle_stops_the_read_with_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let mut journal = Journal::open(&path, 1, 0, FsyncPolicy::Always).unwrap();
        for n in 0..3 {
            journal.append(&leave(n)).unwrap();
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let second = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
        bytes[second + 20] ^= 0x20;
        std::fs::write(&path, bytes).unwrap();
        let reason = read_all(&path).unwrap_err();
        assert!(reason.contains(&format!("byte {second}")), "{reason}");
        // Garbage bytes only: one torn "record", dropped.
        std::fs::write(&path, [0u8; 64]).unwrap();
        assert_eq!(read_all(&path).unwrap().1.dropped_tail_bytes, 64);
        assert_eq!(read_all(&dir.path().join("missing")).unwrap().1.records, 0);
    }
}
