//! The core promises of Vestibule, each proven against the real binary on both stores.
//!
//! One test binary (link time), one file per feature: add a test to the file of its feature, or a
//! new `mod` here.

mod admin_events;
mod admission;
mod auto_rate;
mod bad_input;
mod bots;
mod configuration;
mod document;
mod embedding;
mod eta;
mod eta_edges;
mod figures_replicas;
mod health_url;
mod instant;
mod joins;
mod opening;
mod outage;
mod polls;
mod presence;
mod random_queue;
mod rooms;
mod rooms_race;
mod rooms_replicas;
mod sale;
mod sale_race;
mod sse;
mod tokens;

use serde_json::json;
use vestibule_tests::{Backend, TestApp};

async fn paused_app(backend: Backend, extra: &[&str]) -> TestApp {
    let app = TestApp::spawn(backend, extra).await;
    app.patch_room("main", json!({"paused": true})).await;
    app
}
