//! Vestibule: a virtual waiting room for flash sales.
//!
//! Shoppers join a room's FIFO queue, see an exact position and an honest ETA, and are admitted
//! at the rate the downstream can take with short-lived entry tokens; only token holders reach
//! the protected checkout. See ARCHITECTURE.md for the map.
//!
//! - [`bots`]: bots at the door: proof-of-work challenges, the difficulty's rise, top clients.
//! - [`cli`]: the command line: `serve` (the default), `demo`, `verify-draw`, and the two sizes
//!   of help.
//! - [`docs`]: the generated tables of docs/configuration.md (flags, room settings).
//! - [`demo`]: `vestibule demo`: a demo room with synthetic shoppers.
//! - [`config`]: CLI flags and `VESTIBULE_*` environment variables, validated.
//! - [`startup`]: [`Application`]: builds the store, rooms and tasks, then serves.
//! - [`server`]: the serving threads and the accept loop, HTTP/1.1 and h2c, with a bound on every
//!   wait on a client.
//! - [`state`]: the shared [`state::AppState`] (handles, no rules).
//! - [`http`]: the HTTP edge: routes (one module per resource), error type, entry-token layer,
//!   client address, user assertions.
//! - [`gate`]: gate mode: the reverse proxy in front of a storefront, its rules and sessions.
//! - [`room`]: a running room: scheduler, SSE hub and its loop, ticket status, ETA, outage policy.
//! - [`store`]: the store traits with the Redis and embedded stores (the `vestibule-store` crate).
//! - [`tokens`]: signed entry tokens (JWT, Ed25519): keys, signing, verification, JWKS.
//! - [`ids`]: ticket ids and entry tokens from the OS CSPRNG (in `vestibule-store`).
//! - [`telemetry`]: tracing and the Prometheus recorder.
//! - [`verify_draw`]: the `vestibule verify-draw` subcommand (recomputes a published draw).

pub mod cli;
pub mod config;
pub mod demo;
pub mod docs;
pub mod server;
pub mod startup;
pub mod telemetry;
pub mod verify_draw;

pub use config::Config;
pub use startup::Application;
pub use vestibule_gate as gate;
pub use vestibule_http as http;
pub use vestibule_http::state;
pub use vestibule_room as room;
pub use vestibule_room::{bots, tokens};
pub use vestibule_store as store;
pub use vestibule_store::ids;
