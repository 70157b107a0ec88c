//! A [`Room`] as plain serde data: what a snapshot of the embedded store keeps.
//!
//! Only the state that cannot be derived is kept; token and active-user indexes are rebuilt from
//! the settled tickets. The scheduler lease and its epoch are left out on purpose: a restarted
//! process is the only one on its data dir, and its scheduler takes a fresh lease.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use vestibule_shared::TicketState;

use super::presence::Held;
use super::room::{Room, Settled};
use crate::ids::token_secret;
use crate::Settings;

/// A room's whole state, in a form that survives a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomImage {
    /// The settings in force.
    pub config: Settings,
    /// Which creation of the slug the room is (0 in a snapshot from before generations).
    #[serde(default)]
    pub generation: u64,
    /// The slug's counter at the last settings change (the admin API's `ETag`).
    pub version: u64,
    /// Last arrival sequence handed out.
    pub seq: u64,
    /// Waiting tickets in arrival order: (arrival sequence, ticket id).
    pub waiting: Vec<(u64, String)>,
    /// Tickets that left the queue and are not yet forgotten.
    pub settled: Vec<SettledImage>,
    /// Dedup key → ticket id.
    pub dedup: HashMap<String, String>,
    /// Join-limit state: client → GCRA theoretical arrival time, Unix ms.
    pub join_limits: HashMap<String, u64>,
    /// Shoppers ever admitted (SSE cursor).
    pub popped: u64,
    /// Waiting shoppers that ever left (SSE cursor).
    pub left_count: u64,
    /// Arrival sequences of the last leavers (SSE replay; negative: came back to its place).
    pub left_seqs: Vec<i64>,
    /// Tickets skipped for silence: (id, arrival sequence, held until Unix ms).
    #[serde(default)]
    pub held: Vec<(String, u64, u64)>,
    /// Waiting tickets that came back to their place.
    #[serde(default)]
    pub kept: Vec<String>,
    /// Waiting tickets of the pre-queue not drawn yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prequeue: Vec<String>,
    /// The room's draw seed and result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<super::draw::MemoryDraw>,
    /// When waiting arrival seqs joined: (seq, Unix ms) (the admin API's waiters list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joined: Vec<(u64, u64)>,
}

/// A ticket that left the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettledImage {
    /// The ticket id.
    pub id: String,
    /// Its life-cycle state.
    pub state: TicketState,
    /// Its entry token, while it has one.
    pub token: Option<String>,
    /// Token expiry, Unix ms (0 = never had a token).
    pub expires_at_ms: u64,
    /// When it is forgotten, Unix ms.
    pub forget_at_ms: u64,
    /// The order that used its token: (idempotency key, "" = none; receipt JSON).
    pub order: Option<(String, String)>,
}

impl Room {
    /// This room as an image.
    pub fn image(&self) -> RoomImage {
        let mut settled: Vec<SettledImage> = self
            .settled
            .iter()
            .map(|(id, ticket)| SettledImage {
                id: id.to_string(),
                state: ticket.state,
                token: ticket.token.clone(),
                expires_at_ms: ticket.expires_at_ms,
                forget_at_ms: ticket.forget_at_ms,
                order: ticket.order.clone(),
            })
            .collect();
        // Forget order, so that rebuilding the forget queue needs no sort.
        settled.sort_unstable_by(|a, b| (a.forget_at_ms, &a.id).cmp(&(b.forget_at_ms, &b.id)));
        RoomImage {
            config: self.config.clone(),
            generation: self.generation,
            version: self.version,
            seq: self.seq,
            waiting: self
                .queue
                .iter()
                .map(|(seq, id)| (seq, id.to_string()))
                .collect(),
            settled,
            dedup: self
                .dedup
                .iter()
                .map(|(key, id)| (key.clone(), id.to_string()))
                .collect(),
            join_limits: self.join_limits.clone(),
            popped: self.popped,
            left_count: self.left_count,
            left_seqs: self.left_seqs.iter().copied().collect(),
            held: self
                .presence
                .held
                .iter()
                .map(|(id, held)| (id.to_string(), held.seq, held.until_ms))
                .collect(),
            kept: self.presence.kept.iter().map(|id| id.to_string()).collect(),
            prequeue: self.prequeue.iter().map(|id| id.to_string()).collect(),
            draw: self.draw.clone(),
            joined: self.joined.iter().map(|(seq, at)| (*seq, *at)).collect(),
        }
    }

    /// The room an image describes.
    ///
    /// # Errors
    /// A reason when the image contradicts itself (arrival sequences out of order or past
    /// `seq`): such an image was not written by this code.
    pub fn from_image(image: RoomImage) -> Result<Self, String> {
        let mut room = Room::new(image.config, image.generation);
        room.joined = image.joined.into_iter().collect();
        room.version = image.version;
        room.seq = image.seq;
        let mut last = 0;
        for (seq, id) in image.waiting {
            if seq <= last || seq > image.seq {
                return Err(format!("waiting ticket at arrival {seq} is out of order"));
            }
            last = seq;
            let id: Arc<str> = Arc::from(id);
            room.queue.push(seq, id.clone());
            room.seq_of.insert(id, seq);
        }
        // Ids are shared with the indexes, as the live room shares them.
        let mut ids: HashMap<String, Arc<str>> = HashMap::new();
        for ticket in image.settled {
            let id: Arc<str> = Arc::from(ticket.id.as_str());
            if let Some(token) = &ticket.token {
                room.tokens
                    .insert(token_secret(token).to_owned(), id.clone());
            }
            if ticket.state == TicketState::TokenIssued {
                room.active.insert((ticket.expires_at_ms, id.clone()));
            }
            let settled = Settled {
                state: ticket.state,
                token: ticket.token,
                expires_at_ms: ticket.expires_at_ms,
                forget_at_ms: ticket.forget_at_ms,
                order: ticket.order,
            };
            room.settle(&id, settled);
            ids.insert(ticket.id, id);
        }
        for (key, id) in image.dedup {
            let id = ids.get(&id).cloned().unwrap_or_else(|| Arc::from(id));
            room.dedup.insert(key, id);
        }
        room.join_limits = image.join_limits;
        room.popped = image.popped;
        room.left_count = image.left_count;
        room.left_seqs = VecDeque::from(image.left_seqs);
        for (id, seq, until_ms) in image.held {
            room.presence.hold(&Arc::from(id), Held { seq, until_ms });
        }
        for id in image.kept {
            if let Some((id, _)) = room.seq_of.get_key_value(id.as_str()) {
                room.presence.kept.insert(id.clone());
            }
        }
        for id in image.prequeue {
            let Some((id, _)) = room.seq_of.get_key_value(id.as_str()) else {
                return Err(format!(
                    "pre-queue ticket {} is not waiting",
                    crate::ids::log_tag(&id)
                ));
            };
            room.prequeue.insert(id.clone());
        }
        room.draw = image.draw;
        room.sync_lottery();
        Ok(room)
    }
}
