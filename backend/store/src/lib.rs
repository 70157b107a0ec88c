//! The queue store: one trait per role, and three implementations with the same semantics.
//!
//! Roles (each implemented directly where each store's code for it lives): [`Queue`] (join,
//! read, leave, counts), [`Presence`] (hearing from shoppers, polls, the SSE refresh),
//! [`Admission`] (lease, admission tick, entry tokens), [`Draw`] (scheduled opening),
//! [`Catalog`] (rooms as data) and [`Figures`] (each replica's figures shared, the sale's totals).
//! [`Store`] is all of them plus what describes the store.
//! What is the same for every call (lease length, how long ended tickets are kept) is set when
//! a store is built ([`StoreOptions`]).
//!
//! - [`redis`]: `RedisStore`, production; many replicas share it; every multi-step change is one
//!   Lua script.
//! - [`memory`]: `MemoryStore`, the embedded engine for a single process; no setup.
//! - [`durable`]: `DurableStore`, the embedded default: `MemoryStore` plus a journal and
//!   snapshots in `--data-dir`, so a restart keeps the queue.
//! - [`join_limit`]: the per-client join limit (GCRA) the stores check inside a join.
//! - [`error`]: [`StoreError`], why a store call failed.
//! - [`instant`]: what a join needs to admit at once; [`pace`]: the leader's measured pace.
//! - [`safety`]: how a Redis server is set up, where that can lose queue state.
//! - [`order_index`]: the order-statistics index that gives `MemoryStore` O(log N) positions.
//! - [`room_doc`]: the room model: one document per generation ([`RoomId`], [`RoomDoc`]).
//! - [`ids`]: ticket ids and entry tokens from the OS CSPRNG.
//! - [`draw`]: the draw's records and its published algorithm.
//!
//! Semantics both must keep (docs/DESIGN.md "Queue semantics"): idempotent join by dedup key, order by a
//! per-room arrival sequence, 1-based exact positions, admission that pops and issues tokens in one
//! atomic step fenced by the leader epoch, and tokens consumed exactly once. Every call names the
//! generation of the room it is for and changes nothing when that generation is not the live one
//! ([`StoreError::RoomGone`]).

pub mod admission;
pub mod catalog;
pub mod draw;
pub mod durable;
pub mod error;
pub mod figures;
pub mod ids;
pub mod instant;
pub mod join_limit;
pub mod labels;
pub mod lottery;
pub mod memory;
pub mod options;
pub mod order_index;
pub mod pace;
pub mod presence;
pub mod queue;
pub mod redis;
mod room_doc;
pub mod safety;
pub mod sale;
mod settings;

pub use admission::{
    Admission, AdmitOutcome, AdmitRequest, LeaseOutcome, OrderClaim, TokenCheck, TokenUse,
};
use async_trait::async_trait;
pub use catalog::{AuditRecord, Catalog, RoomDeletion, WaiterPage, WaiterRecord};
pub use draw::{Draw, DrawOutcome, DrawRecord, DrawRequest, DRAW_PLACES_PER_STEP};
pub use error::StoreError;
pub use figures::{FigureShare, Figures, SaleTotals, SharedFigures};
pub use instant::InstantAdmission;
pub use join_limit::{gcra, JoinLimit};
pub use labels::{LabelsPatch, RoomLabels};
pub use options::StoreOptions;
pub use pace::Pace;
pub use presence::{
    hear_unanchored, PollAnchor, PolledTicket, Presence, QueueCursor, QueueDelta, SseRefresh,
};
pub use queue::{
    JoinKind, JoinOutcome, JoinReply, JoinRequest, LeaveOutcome, Queue, RoomCounts, Unconfirmed,
};
pub use room_doc::{RoomDoc, RoomId};
pub use safety::StoreSafety;
pub use sale::{JoinRefusal, SalePatch, SaleSettings};
pub use settings::{
    default_abandon_after_ms, default_hold_place_ms, QueueingMethod, Settings, SettingsPatch,
    SettingsUpdate, VersionedSettings,
};
use vestibule_shared::TicketState;

/// What the store knows of one ticket.
#[derive(Debug, Clone, PartialEq)]
pub struct TicketRecord {
    /// The ticket id (bearer secret).
    pub id: String,
    /// Life-cycle state; `TOKEN_ISSUED` past its expiry is reported as `EXPIRED`.
    pub state: TicketState,
    /// 1-based position while `WAITING`.
    pub position: Option<u64>,
    /// The entry token while `TOKEN_ISSUED`.
    pub entry_token: Option<String>,
    /// Token expiry, Unix milliseconds, while `TOKEN_ISSUED`.
    pub token_expires_at_ms: Option<u64>,
    /// Skipped for silence, then heard from within the hold time: its place was kept (only
    /// reported by [`Store::hear`] reads).
    pub place_kept: bool,
}

impl TicketRecord {
    /// A waiting ticket at a 1-based `position`.
    pub fn waiting(id: &str, position: u64) -> Self {
        Self {
            id: id.to_owned(),
            state: TicketState::Waiting,
            position: Some(position),
            entry_token: None,
            token_expires_at_ms: None,
            place_kept: false,
        }
    }
}

/// The queue store: every role, and what describes the store itself. Routes and the scheduler
/// see only this trait (as `Arc<dyn Store>`). Every call names the generation of the room it is
/// for and changes nothing when that generation is not the live one ([`StoreError::RoomGone`]).
#[async_trait]
pub trait Store: Queue + Presence + Admission + Draw + Catalog + Figures + 'static {
    /// `"redis"`, `"memory"` (embedded, nothing kept) or `"durable"` (embedded, kept in
    /// `--data-dir`), for logs and `/readyz`.
    fn kind(&self) -> &'static str;

    /// Whether the store answers.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when it does not.
    async fn ping(&self) -> Result<(), StoreError>;

    /// How the store is set up where that can lose queue state (Redis: eviction policy and
    /// persistence); `None` for the embedded store.
    async fn safety(&self) -> Result<Option<StoreSafety>, StoreError> {
        Ok(None)
    }
}

/// Now as Unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}
