//! Hardening: each promise of docs/guarantees.md proven by injecting the fault.
//!
//! One test binary (link time), one file per promise: add a test to the file of its promise, or a
//! new `mod` here.

mod abuse;
mod failover;
mod hostile_input;
mod outage;
mod persistence;
mod secrets;
