//! The rooms a process starts with: `--rooms` seeded, then every room the store holds.

use std::sync::Arc;

use anyhow::Context as _;

use crate::config::Config;
use crate::room::RoomRuntime;
use crate::store::{RoomDoc, Settings, Store};
use crate::tokens::TokenService;

/// Seeds the rooms of `--rooms` that do not exist yet, then starts every live room in the store.
///
/// # Errors
/// A store call failed.
pub(super) async fn start_rooms(
    store: &dyn Store,
    config: &Config,
    tokens: &Arc<TokenService>,
) -> anyhow::Result<Vec<Arc<RoomRuntime>>> {
    // `--rooms` seeds the rooms that do not exist yet; every room in the store runs
    // (rooms created at run time are data, like the settings).
    for room in &config.rooms {
        store
            .seed_room(room, &config.default_settings_for(room))
            .await
            .with_context(|| format!("initialising room {room}"))?;
    }
    let mut rooms = Vec::new();
    let listed = store.list_rooms().await.context("listing the rooms")?;
    for room in listed {
        // The document decides; a slug the index still names after a deletion (or whose
        // document the store lost) starts nothing: the first sync mends the index.
        let doc = store
            .room_doc(&room)
            .await
            .with_context(|| format!("reading the document of room {room}"))?;
        if let Some(RoomDoc::Live(in_force)) = doc {
            if config.rooms.contains(&room) {
                let differences =
                    flag_differences(&config.default_settings_for(&room), &in_force.settings);
                if !differences.is_empty() {
                    tracing::warn!(
                        "room {room} runs on its stored settings, not the flags: {}; flags shape \
                         only new rooms (change a running room with PATCH or the console)",
                        differences.join(", ")
                    );
                }
            }
            rooms.push(Arc::new(RoomRuntime::new(room, in_force, tokens.clone())));
        }
    }
    Ok(rooms)
}

/// The room settings the flags set (`--admission-rate`, `--token-ttl-secs`,
/// `--max-active-users`, `--expected-checkout-secs`, `--checkout-url`,
/// `--share-token-with-embedder`) on which a running room's `stored` settings differ from what
/// the flags would give a new room, as `stored … (flag …)`.
fn flag_differences(flags: &Settings, stored: &Settings) -> Vec<String> {
    let secs = |ms: u64| ms / 1000;
    let optional = |value: Option<u64>| value.map_or("none".to_owned(), |v| v.to_string());
    let mut out = Vec::new();
    let mut differ = |name: &str, stored: String, flag: String| {
        if stored != flag {
            out.push(format!("{name} {stored} stored (flag: {flag})"));
        }
    };
    differ(
        "admission rate /s",
        stored.admission_rate_per_sec.to_string(),
        flags.admission_rate_per_sec.to_string(),
    );
    differ(
        "token TTL s",
        secs(stored.token_ttl_ms).to_string(),
        secs(flags.token_ttl_ms).to_string(),
    );
    differ(
        "max active users",
        optional(stored.max_active_users),
        optional(flags.max_active_users),
    );
    differ(
        "expected checkout s",
        optional(stored.expected_checkout_ms.map(secs)),
        optional(flags.expected_checkout_ms.map(secs)),
    );
    differ(
        "checkout URL",
        stored.checkout_url.clone().unwrap_or_else(|| "none".into()),
        flags.checkout_url.clone().unwrap_or_else(|| "none".into()),
    );
    differ(
        "share token with embedder",
        stored.share_token_with_embedder.to_string(),
        flags.share_token_with_embedder.to_string(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_a_running_room_does_not_follow_is_named_with_both_values() {
        let flags: Settings = serde_json::from_value(serde_json::json!({
            "admissionRatePerSec": 99.0, "paused": false, "tokenTtlMs": 300_000,
        }))
        .expect("settings");
        assert!(flag_differences(&flags, &flags).is_empty());
        let stored = Settings {
            admission_rate_per_sec: 175.0,
            max_active_users: Some(20),
            ..flags.clone()
        };
        assert_eq!(
            flag_differences(&flags, &stored),
            [
                "admission rate /s 175 stored (flag: 99)",
                "max active users 20 stored (flag: none)"
            ]
        );
    }
}
