//! The room model every store keeps (docs/DESIGN.md "Rooms at run time"): a room is one
//! document per **generation**. Each creation of a slug takes the next value of the slug's
//! counter (never reset) as its generation; its document holds that generation, a version and
//! the settings, and is either live or deleted. Everything a store keeps for a room (queue,
//! tickets, tokens, draw, presence) belongs to one generation, and a call names the generation
//! it is for ([`RoomId`]): a call for a generation that is not the live one changes nothing
//! and fails with [`StoreError::RoomGone`](super::StoreError::RoomGone).
//!
//! Versions come from the same counter as generations: a create takes the next value as both,
//! and every change of the settings takes the next value as the new version. So versions only
//! grow across the slug's whole life, and an `If-Match` of a deleted generation never matches a
//! later one.

use super::VersionedSettings;

/// Which creation of a room a store call is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoomId<'a> {
    /// The room's slug (`[a-z0-9-]{1,64}`).
    pub slug: &'a str,
    /// Its generation: the value of the slug's counter when this creation was made.
    pub generation: u64,
}

impl<'a> RoomId<'a> {
    /// The room `slug` at `generation`.
    pub fn new(slug: &'a str, generation: u64) -> Self {
        Self { slug, generation }
    }
}

impl std::fmt::Display for RoomId<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} (generation {})", self.slug, self.generation)
    }
}

/// A room's document as the store holds it.
// Read a few times per tick per room and matched at once: a box would only move the bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum RoomDoc {
    /// The live generation, with its version and settings.
    Live(VersionedSettings),
    /// The last generation was deleted (and none was created since).
    Deleted {
        /// The deleted generation.
        generation: u64,
    },
}

impl RoomDoc {
    /// The generation the document is about.
    pub fn generation(&self) -> u64 {
        match self {
            Self::Live(settings) => settings.generation,
            Self::Deleted { generation } => *generation,
        }
    }
}
