//! Vestibule's flash-sale benchmark: a load generator with a shopper model, and the report.
//!
//! - [`profile`]: tiny / short / full sizes of a run.
//! - [`runner`]: all stages in order into one [`report::Report`].
//! - [`baselines`]: the HTTP ceiling (bare axum hello) and the store ceiling (redis-benchmark).
//! - [`sale`]: the flash-sale stage and its figures; [`flash_sale`]: the shopper model itself;
//!   [`calibration`]: the ETA range shown vs the wait, per decile, steady and with the rate halved;
//!   [`eta_edges`]: the ETA and the poll hint at a capped room's cold start, when checkout slows,
//!   and while unused tokens hold the stock.
//! - [`capacity`]: joins/s and polls/s at saturation, poll latency at a fixed rate, memory;
//!   [`bare_join`]: the stack's floor for a join it is also measured against.
//! - [`embedded`]: the embedded store's joins/s and polls/s, memory only vs durable;
//!   [`embedded_inprocess`]: the same through the `Store` trait, and snapshot and restart times.
//! - [`position_cost`]: poll latency with 1K vs 1M waiting.
//! - [`orders_confirm`]: orders/s and order latency with a token's use confirmed on a replica
//!   (`WAIT`) and without.
//! - [`sse_capacity`]: SSE streams per process, RSS per stream, Redis load as they grow.
//! - [`gate_overhead`]: gate mode's requests/s and added p99 vs straight and vs nginx;
//!   [`bare_proxy`]: the libraries' floor it is also measured against.
//! - [`analysis`]: Kendall-tau distance, admission-rate fit, tick bursts.
//! - [`http`], [`sse`], [`load`]: the client, the SSE reader, closed and open load loops.
//! - [`procs`], [`redis_probe`]: the processes under test and direct reads of Redis.
//! - [`report`]: the Markdown table and its JSON twin.

pub mod analysis;
pub mod auto_rate;
pub mod bare_join;
pub mod bare_proxy;
pub mod baselines;
pub mod calibration;
pub mod capacity;
pub mod embedded;
pub mod embedded_inprocess;
pub mod eta_edges;
pub mod flash_sale;
pub mod gate_overhead;
pub mod ghosts;
pub mod http;
pub mod load;
pub mod orders_confirm;
pub mod position_cost;
pub mod procs;
pub mod profile;
pub mod redis_probe;
pub mod report;
pub mod runner;
pub mod sale;
pub mod scheduled_drop;
pub mod sse;
pub mod sse_capacity;
