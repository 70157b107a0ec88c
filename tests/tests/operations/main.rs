//! What an operator meets running Vestibule: a Redis that may evict keys, shutdown with clients
//! that never read, client addresses behind proxies, and a server started from another folder.
//! Some cases replay a fault reported against another product (named beside the test).
//!
//! One test binary (link time), one file per concern: add a test to the file of its concern, or
//! a new `mod` here.

mod client_addresses;
mod client_bounds;
mod redis_settings;
mod replica_metrics;
mod serving_threads;
mod started_elsewhere;
