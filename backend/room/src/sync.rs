//! How this process follows the store's rooms: [`sync_loop`] reads the index of rooms and the
//! rooms' documents every tick and hands each to the registry (`Rooms::apply`), and
//! [`run_each_room`] starts a task for every room the registry runs (its scheduler, its SSE hub).

use std::sync::Arc;

use tokio::sync::watch;

use crate::tokens::TokenService;
use crate::{RoomRuntime, Rooms};
use vestibule_store::Store;

/// Runs `task` for each room running now and for every room put later, on the current runtime,
/// until `shutdown`; then waits for the tasks (each ends on shutdown or when its room retires).
pub async fn run_each_room<F>(
    rooms: Arc<Rooms>,
    mut shutdown: watch::Receiver<bool>,
    task: impl Fn(Arc<RoomRuntime>) -> F,
) where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut starts = rooms.starts();
    let mut running = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            room = starts.recv() => match room {
                Some(room) => {
                    running.spawn(task(room));
                }
                None => break,
            },
            Some(_) = running.join_next(), if !running.is_empty() => {}
            _ = shutdown.wait_for(|stopping| *stopping) => break,
        }
    }
    while running.join_next().await.is_some() {}
}

/// Every `tick`, reads the index of rooms and the document of every slug it names or that runs
/// here, and brings the registry in line with them. Ends on shutdown.
pub async fn sync_loop(
    rooms: Arc<Rooms>,
    store: Arc<dyn Store>,
    tokens: Arc<TokenService>,
    tick: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut outage_logged = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
        let listed = match store.list_rooms().await {
            Ok(listed) => listed,
            Err(error) => {
                if !std::mem::replace(&mut outage_logged, true) {
                    tracing::warn!(%error, "the list of rooms cannot be read; rooms stay as they are");
                }
                continue;
            }
        };
        outage_logged = false;
        let mut slugs: Vec<(String, bool)> = listed.into_iter().map(|slug| (slug, true)).collect();
        for room in rooms.list() {
            if !slugs.iter().any(|(slug, _)| *slug == room.name) {
                slugs.push((room.name.clone(), false));
            }
        }
        let docs =
            futures_util::future::join_all(slugs.iter().map(|(slug, _)| store.room_doc(slug)))
                .await;
        for ((slug, listed), doc) in slugs.iter().zip(docs) {
            if let Ok(doc) = doc {
                rooms
                    .apply(&*store, &tokens, slug, doc, Some(*listed))
                    .await;
            }
        }
    }
}
