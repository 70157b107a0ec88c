//! One journal record: the inputs of a state-changing store call, with the time it ran at.
//!
//! The engine's room operations are deterministic in (state, inputs, time), so replaying the
//! recorded changes in order on the last snapshot rebuilds exactly the state the process had.
//! Calls that changed nothing (a retried join that found its ticket, a refused join, a fenced or
//! empty admission, a refused token) are not recorded.

use serde::{Deserialize, Serialize};

use crate::memory::MemoryStore;
use crate::{InstantAdmission, JoinLimit, OrderClaim, Settings, StoreError};

/// A state-changing call as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Change {
    /// A room created (its slug's next generation) with its settings.
    InitRoom {
        /// Room slug.
        room: String,
        /// The settings it was created with.
        defaults: Settings,
    },
    /// A join that created a ticket.
    Join {
        /// Room slug.
        room: String,
        /// Its dedup key, if any.
        key: Option<String>,
        /// The new ticket's id.
        id: String,
        /// The join limit it passed, if any (its state is kept too).
        limit: Option<JoinLimit>,
        /// When it ran, Unix ms.
        now_ms: u64,
        /// Set when the join admitted its shopper at once (nobody was waiting).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instant: Option<InstantJoin>,
    },
    /// A leave that ended a waiting or issued ticket.
    Leave {
        /// Room slug.
        room: String,
        /// The ticket id.
        id: String,
        /// When it ran, Unix ms.
        now_ms: u64,
        /// How long the ended ticket stays queryable, ms.
        keep_ms: u64,
    },
    /// An admission that admitted at least one shopper.
    Admit {
        /// Room slug.
        room: String,
        /// The tick's time, Unix ms.
        now_ms: u64,
        /// Token TTL, ms.
        token_ttl_ms: u64,
        /// How long finished tickets stay queryable, ms.
        keep_ms: u64,
        /// The active-users cap of the tick.
        max_active_users: Option<u64>,
        /// The tokens given out, in admission order (exactly the admitted count).
        tokens: Vec<String>,
        /// Waiting tickets skipped for silence before admitting (docs/DESIGN.md "Presence").
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skipped: Vec<String>,
        /// How long the skipped keep their place, ms.
        #[serde(default)]
        hold_place_ms: u64,
    },
    /// Skipped tickets heard from within their hold: back at their place.
    Return {
        /// Room slug.
        room: String,
        /// The tickets that came back.
        ids: Vec<String>,
        /// When it ran, Unix ms.
        now_ms: u64,
    },
    /// Tickets of joins nobody heard the answer of, parked (`Presence::park_unconfirmed`).
    Park {
        /// Room slug.
        room: String,
        /// The tickets parked.
        ids: Vec<String>,
        /// When it ran, Unix ms.
        now_ms: u64,
        /// How long they keep their place, ms.
        hold_place_ms: u64,
    },
    /// An entry token used by an order.
    ConsumeToken {
        /// Room slug.
        room: String,
        /// The entry token.
        token: String,
        /// The order's idempotency key.
        key: Option<String>,
        /// The order's receipt (JSON text).
        receipt: String,
        /// When it ran, Unix ms.
        now_ms: u64,
        /// How long the completed ticket stays queryable, ms.
        keep_ms: u64,
    },
    /// A pre-queue join that created a ticket.
    JoinPrequeue {
        /// Room slug.
        room: String,
        /// Its dedup key, if any.
        key: Option<String>,
        /// The new ticket's id.
        id: String,
        /// The join limit it passed, if any.
        limit: Option<JoinLimit>,
        /// When it ran, Unix ms.
        now_ms: u64,
    },
    /// The room's draw seed, written once.
    DrawSeed {
        /// Room slug.
        room: String,
        /// The seed, 64 hex digits.
        seed: String,
    },
    /// The draw at the opening.
    Draw {
        /// Room slug.
        room: String,
        /// The pre-queue's ticket ids in place order.
        ids: Vec<String>,
        /// Their tags.
        tags: Vec<String>,
        /// When it ran, Unix ms.
        now_ms: u64,
        /// The order follows from the mixed seed (`vestibule_store::draw::mixed_seed`); absent
        /// (false) in journals written before the mix.
        #[serde(default)]
        mixed: bool,
    },
    /// A settings change that applied: the settings it left in force (a replay applies them
    /// whole and bumps the version, as the change did).
    UpdateRoom {
        /// Room slug.
        room: String,
        /// The settings after the change.
        config: Settings,
    },
    /// Audit entries of admin changes, with the ids they were given.
    Audit {
        /// Room slug.
        room: String,
        /// The entries, oldest first.
        entries: Vec<crate::AuditRecord>,
    },
    /// A room deleted by an operator, with every ticket in it.
    DeleteRoom {
        /// Room slug.
        room: String,
        /// When it ran, Unix ms.
        now_ms: u64,
    },
}

/// The admission an instant join made, as the journal keeps it (replayed as it happened,
/// whatever the bank of unused quota held: the bank is not kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstantJoin {
    /// The entry token given.
    pub token: String,
    /// Token TTL, ms.
    pub token_ttl_ms: u64,
    /// How long the finished ticket stays queryable, ms.
    pub keep_ms: u64,
}

impl Change {
    /// Applies this change to `engine` as the original call did.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when the change names a room the journal never created (or had
    /// deleted). A journal's changes carry no generation: replayed in order, each finds the
    /// generation it was made on live.
    pub fn replay(&self, engine: &MemoryStore) -> Result<(), StoreError> {
        match self {
            Self::InitRoom { room, defaults } => {
                engine.create_room(room, defaults);
                Ok(())
            }
            Self::Join {
                room,
                key,
                id,
                limit,
                now_ms,
                instant,
            } => engine.with_live_room(room, |state| {
                state.join(key.as_deref(), id, limit.as_ref(), *now_ms);
                if let Some(instant) = instant {
                    let admission = InstantAdmission {
                        token: instant.token.clone(),
                        now_ms: *now_ms,
                        token_ttl_ms: instant.token_ttl_ms,
                        settings_version: None,
                    };
                    state.admit_joined(&admission, instant.keep_ms);
                }
            }),
            Self::Leave {
                room,
                id,
                now_ms,
                keep_ms,
            } => engine.with_live_room(room, |state| {
                state.leave(id, *now_ms, *keep_ms);
            }),
            Self::Admit {
                room,
                now_ms,
                token_ttl_ms,
                keep_ms,
                max_active_users,
                tokens,
                skipped,
                hold_place_ms,
            } => engine.with_live_room(room, |state| {
                let skipped: Vec<std::sync::Arc<str>> =
                    skipped.iter().map(|id| id.as_str().into()).collect();
                state.skip(&skipped, *now_ms, *hold_place_ms);
                state.admit_unfenced(*now_ms, *token_ttl_ms, *keep_ms, *max_active_users, tokens);
            }),
            Self::Return { room, ids, now_ms } => engine.with_live_room(room, |state| {
                for id in ids {
                    state.bring_back(id, *now_ms);
                }
            }),
            Self::Park {
                room,
                ids,
                now_ms,
                hold_place_ms,
            } => engine.with_live_room(room, |state| {
                let ids: Vec<std::sync::Arc<str>> =
                    ids.iter().map(|id| id.as_str().into()).collect();
                state.skip(&ids, *now_ms, *hold_place_ms);
            }),
            Self::ConsumeToken {
                room,
                token,
                key,
                receipt,
                now_ms,
                keep_ms,
            } => engine.with_live_room(room, |state| {
                let claim = OrderClaim {
                    idempotency_key: key.as_deref(),
                    receipt,
                };
                state.consume_token(token, &claim, *now_ms, *keep_ms);
            }),
            Self::JoinPrequeue {
                room,
                key,
                id,
                limit,
                now_ms,
            } => engine.with_live_room(room, |state| {
                state.join_prequeue(key.as_deref(), id, limit.as_ref(), *now_ms, None);
            }),
            Self::DrawSeed { room, seed } => engine.with_live_room(room, |state| {
                state.draw_seed(seed);
            }),
            Self::Draw {
                room,
                ids,
                tags,
                now_ms,
                mixed,
            } => engine.with_live_room(room, |state| {
                state.draw_unfenced(ids, tags, *now_ms, *mixed);
            }),
            Self::UpdateRoom { room, config } => engine.with_live_room(room, |state| {
                state.update(&config.as_patch(), None, || engine.next_count(room));
            }),
            Self::Audit { room, entries } => {
                engine.push_audit(room, entries, true);
                Ok(())
            }
            Self::DeleteRoom { room, now_ms } => {
                engine.remove_room(room, None, true, *now_ms);
                Ok(())
            }
        }
    }
}
