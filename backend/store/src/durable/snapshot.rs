//! The snapshot: every room's image as one JSON file, replaced atomically.
//!
//! Written to a temporary file, synced, renamed over the old one and the folder synced: at every
//! instant the data dir holds either the old or the new snapshot whole, even across a power
//! loss. The journal is emptied only after that, and the snapshot names the last journal record
//! it contains, so the order of the two steps never applies a record twice.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::memory::image::RoomImage;
use crate::memory::{MemoryStore, Room, SlugRecord};

/// The snapshot format this code writes and reads.
const FORMAT: u32 = 1;

/// Every room at one journal position.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// The last journal record this snapshot contains (0 = none).
    pub last_seq: u64,
    /// Room slug → image.
    pub rooms: BTreeMap<String, RoomImage>,
    /// Room slug → its audit log, oldest entry first (kept after a room is deleted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub audit: BTreeMap<String, Vec<crate::AuditRecord>>,
    /// Slug → what it ever had: its counter of generations and versions, its last deleted
    /// generation (a snapshot from before generations has none: the rooms' versions count).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slugs: BTreeMap<String, SlugRecord>,
}

impl Snapshot {
    /// The snapshot of `rooms` and the `audit` logs (copies taken at journal record `last_seq`).
    pub fn of(
        rooms: Vec<(String, Room)>,
        audit: BTreeMap<String, Vec<crate::AuditRecord>>,
        slugs: BTreeMap<String, SlugRecord>,
        last_seq: u64,
    ) -> Self {
        let rooms = rooms
            .into_iter()
            .map(|(name, room)| (name, room.image()))
            .collect();
        Self {
            format: FORMAT,
            last_seq,
            rooms,
            audit,
            slugs,
        }
    }

    /// Puts every room of this snapshot into `engine`.
    ///
    /// # Errors
    /// A reason naming a room whose image contradicts itself.
    pub fn restore(self, engine: &MemoryStore) -> Result<(), String> {
        engine.restore_slug_records(self.slugs);
        for (name, image) in self.rooms {
            let room =
                Room::from_image(image).map_err(|reason| format!("room {name}: {reason}"))?;
            engine.insert_room(&name, room);
        }
        for (room, entries) in &self.audit {
            engine.push_audit(room, entries, true);
        }
        Ok(())
    }

    /// Writes this snapshot as `path`, atomically (temp file, sync, rename, sync the folder).
    /// Returns its size in bytes.
    ///
    /// # Errors
    /// Any I/O error; the previous snapshot at `path` is then untouched.
    pub fn write(&self, path: &Path) -> std::io::Result<u64> {
        let temp = path.with_extension("json.tmp");
        let file = File::create(&temp)?;
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        serde_json::to_writer(&mut writer, self)?;
        writer.flush()?;
        let file = writer.into_inner().map_err(|error| error.into_error())?;
        file.sync_all()?;
        let bytes = file.metadata()?.len();
        drop(file);
        std::fs::rename(&temp, path)?;
        if let Some(folder) = path.parent() {
            File::open(folder)?.sync_all()?;
        }
        Ok(bytes)
    }

    /// Reads the snapshot at `path`; `None` when there is none yet.
    ///
    /// # Errors
    /// A reason when the file cannot be read or is not a snapshot of this format.
    pub fn load(path: &Path) -> Result<Option<(Self, u64)>, String> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("reading {}: {error}", path.display())),
        };
        let bytes = file.metadata().map_or(0, |meta| meta.len());
        let snapshot: Self = serde_json::from_reader(BufReader::with_capacity(1 << 20, file))
            .map_err(|error| format!("{} does not read back: {error}", path.display()))?;
        if snapshot.format != FORMAT {
            return Err(format!(
                "{} has format {}, this build reads {FORMAT}",
                path.display(),
                snapshot.format
            ));
        }
        Ok(Some((snapshot, bytes)))
    }
}
