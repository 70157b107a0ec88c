//! Vestibule: a virtual waiting room for flash sales.
//!
//! Shoppers join a room's FIFO queue, see an exact position and an honest ETA, and are admitted
//! at the rate the downstream can take with short-lived entry tokens; only token holders reach
//! the protected checkout. See ARCHITECTURE.md for the map.
//!
//! - [`config`]: CLI flags and `VESTIBULE_*` environment variables, validated.
//! - [`startup`]: [`Application`]: builds the store, rooms and tasks, then serves.
//! - [`routes`]: the HTTP API and the page, one module per resource.
//! - [`store`]: the store trait with its Redis and embedded implementations.
//! - [`scheduler`]: per-room admission ticks, leader lease and quota with carry.
//! - [`token_layer`]: the entry-token middleware on protected prefixes.
//! - [`sse_hub`]: batched fan-out of ticket updates to SSE streams.
//! - [`eta`]: the ETA and poll-hint formulas, and the poll-hint tiers.
//! - [`outage`]: what protected paths do while the store is down (`--outage-policy`).
//! - [`state`]: the shared [`state::AppState`] (handles) and each room's [`state::RoomRuntime`].
//! - [`status`]: a ticket's public status from its record and the room's settings (pure).
//! - [`hub_loop`]: each room's SSE refresh loop, with the little it needs ([`hub_loop::HubContext`]).
//! - [`error`]: the HTTP edge's error type and JSON extractors.
//! - [`ids`]: ticket ids and entry tokens from the OS CSPRNG.
//! - [`client_ip`]: the client's address, from the peer or trusted forwarding headers.
//! - [`user_assertion`]: storefront-signed user ids (HMAC-SHA256).
//! - [`telemetry`]: tracing and the Prometheus recorder.

pub mod client_ip;
pub mod config;
pub mod error;
pub mod eta;
pub mod hub_loop;
pub mod ids;
pub mod outage;
pub mod routes;
pub mod scheduler;
pub mod sse_hub;
pub mod startup;
pub mod state;
pub mod status;
pub mod store;
pub mod telemetry;
pub mod token_layer;
pub mod user_assertion;

pub use config::Config;
pub use startup::Application;
