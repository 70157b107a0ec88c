//! Vestibule's domain: everything about a room while it runs (admission, fan-out to streams, a
//! ticket's public status), the signed entry tokens and the bots at the door. It depends on the
//! store (`vestibule-store`) and nothing above it.
//!
//! - [`options`]: [`RoomOptions`], what a room takes from the configuration; [`replica_id`].
//! - [`tokens`]: signed entry tokens (JWT, Ed25519): keys, signing, verification.
//! - [`bots`]: proof-of-work challenges, the difficulty's rise, top clients.
//! - [`runtime`]: [`RoomRuntime`], a room's settings as last read, its SSE hub, its active users.
//! - [`figures`]: every room's live figures for the admin event stream, read once a second.
//! - [`counters`]: a room's running totals here (joins, polls, admissions, …) and its leadership.
//! - [`scheduler`]: per-room admission ticks, leader lease and quota with carry.
//! - [`ticket_watch`]: pushes ticket updates to SSE streams (one batched store call per refresh)
//!   and answers polls from memory; its refresh loop, with the little it needs
//!   ([`ticket_watch::refresh_loop::HubContext`]).
//! - [`status`]: a ticket's public status from its record and the room's settings (pure).
//! - [`public_state`]: the room's public state (`OPEN`, `PAUSED`, `SOLD_OUT`, `CLOSED`, …) and how it shows on tickets.
//! - [`eta`]: the ETA and poll-hint formulas, and the poll-hint tiers.
//! - [`presence`]: the abandon time in force, heartbeat and stream-presence periods.
//! - [`pace`]: the leader's measurement of the admission rate and the finish rate it achieves.
//! - [`opening`]: a scheduled opening's phase and its provably fair draw.
//! - [`registry`]: [`registry::Rooms`], the rooms running here, one generation each.
//! - [`sync`]: the registry kept in line with the rooms' documents every tick; a task per room.
//! - [`outage`]: what protected paths do while the store is down (`--outage-policy`).

pub mod auto_rate;
pub mod bots;
pub mod counters;
pub mod eta;
pub mod figure_record;
pub mod figures;
pub mod history;
pub mod opening;
pub mod options;
pub mod outage;
pub mod pace;
pub mod presence;
pub mod public_state;
pub mod registry;
pub mod runtime;
pub mod scheduler;
pub mod status;
pub mod sync;
#[cfg(test)]
mod test_settings;
pub mod ticket_watch;
pub mod tokens;

pub use options::{replica_id, RoomOptions};
pub use registry::Rooms;
pub use runtime::RoomRuntime;
