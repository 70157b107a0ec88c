//! The rooms a process starts with: `--rooms` seeded, then every room the store holds.

use std::sync::Arc;

use anyhow::Context as _;

use crate::config::Config;
use crate::room::RoomRuntime;
use crate::store::{RoomDoc, Store};
use crate::tokens::TokenService;

/// Seeds the rooms of `--rooms` that do not exist yet, then starts every live room in the store.
///
/// # Errors
/// A store call failed.
pub(super) async fn start_rooms(
    store: &dyn Store,
    config: &Config,
    tokens: &Arc<TokenService>,
) -> anyhow::Result<Vec<Arc<RoomRuntime>>> {
    // `--rooms` seeds the rooms that do not exist yet; every room in the store runs
    // (rooms created at run time are data, like the settings).
    for room in &config.rooms {
        store
            .seed_room(room, &config.default_settings_for(room))
            .await
            .with_context(|| format!("initialising room {room}"))?;
    }
    let mut rooms = Vec::new();
    let listed = store.list_rooms().await.context("listing the rooms")?;
    for room in listed {
        // The document decides; a slug the index still names after a deletion (or whose
        // document the store lost) starts nothing: the first sync mends the index.
        let doc = store
            .room_doc(&room)
            .await
            .with_context(|| format!("reading the document of room {room}"))?;
        if let Some(RoomDoc::Live(in_force)) = doc {
            rooms.push(Arc::new(RoomRuntime::new(room, in_force, tokens.clone())));
        }
    }
    Ok(rooms)
}
