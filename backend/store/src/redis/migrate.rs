//! Rooms an earlier version of Vestibule wrote, moved into documents at start (docs/operating.md,
//! "Upgrading"). Before documents, a room's settings were the hash `vestibule:{r}:settings`, a
//! deleted room was marked by the key `vestibule:{r}:gone`, and the set of rooms was
//! `vestibule:rooms` in the earliest versions, [`ROOMS_KEY`] since. Each such room becomes
//! generation 0, whose keys are the old ones (`keys.rs`), so its waiting line carries on.

use std::collections::HashMap;

use super::keys::{slug_prefix, Key, RoomKeys, ROOMS_KEY};
use super::RedisStore;
use crate::{
    Catalog, QueueingMethod, RoomLabels, SaleSettings, Settings, StoreError, VersionedSettings,
};

/// The set of rooms of the earliest versions.
const OLDEST_ROOMS_KEY: &str = "vestibule:rooms";

impl RedisStore {
    /// Moves the rooms an earlier version wrote into documents: each slug of the sets of rooms
    /// whose document is missing and whose old settings hash is there (not marked deleted).
    /// Idempotent; at a start with nothing to move, one `SMEMBERS` per set and one `EXISTS` per
    /// room.
    pub(super) async fn migrate(&self) -> Result<(), StoreError> {
        let mut connection = self.link.connection.clone();
        let mut slugs: Vec<String> = Vec::new();
        for key in [OLDEST_ROOMS_KEY, ROOMS_KEY] {
            // One key a command: on a cluster the two sets live on different slots.
            let members: Vec<String> = self
                .link
                .bounded(redis::cmd("SMEMBERS").arg(key).query_async(&mut connection))
                .await?;
            slugs.extend(members);
        }
        slugs.sort_unstable();
        slugs.dedup();
        let mut moved = 0;
        for slug in &slugs {
            let prefix = slug_prefix(slug);
            let document: i64 = self
                .link
                .bounded(
                    redis::cmd("EXISTS")
                        .arg(RoomKeys::slug(slug).of(Key::Doc))
                        .query_async(&mut connection),
                )
                .await?;
            if document == 1 {
                continue;
            }
            let fields: HashMap<String, String> = self
                .link
                .bounded(
                    redis::cmd("HGETALL")
                        .arg(format!("{prefix}settings"))
                        .query_async(&mut connection),
                )
                .await?;
            let deleted: i64 = self
                .link
                .bounded(
                    redis::cmd("EXISTS")
                        .arg(format!("{prefix}gone"))
                        .query_async(&mut connection),
                )
                .await?;
            if fields.is_empty() || deleted == 1 {
                continue;
            }
            let held = VersionedSettings {
                settings: old_settings(&fields)?,
                generation: 0,
                version: fields.get("ver").and_then(|v| v.parse().ok()).unwrap_or(0),
            };
            self.write_back_room(slug, &held).await?;
            let _: i64 = self
                .link
                .bounded(
                    redis::cmd("DEL")
                        .arg(format!("{prefix}settings"))
                        .query_async(&mut connection),
                )
                .await?;
            moved += 1;
        }
        let _: i64 = self
            .link
            .bounded(
                redis::cmd("DEL")
                    .arg(OLDEST_ROOMS_KEY)
                    .query_async(&mut connection),
            )
            .await?;
        if moved > 0 {
            tracing::info!(
                rooms = moved,
                "moved the rooms of an earlier version into room documents"
            );
        }
        Ok(())
    }
}

/// A room's settings from the hash an earlier version kept them in (absent or empty fields are
/// their defaults).
fn old_settings(fields: &HashMap<String, String>) -> Result<Settings, StoreError> {
    let text = |name: &str| {
        fields
            .get(name)
            .filter(|value| !value.is_empty())
            .map(String::as_str)
    };
    let number = |name: &str| -> Result<Option<u64>, StoreError> {
        text(name)
            .map(|value| {
                value
                    .parse::<i64>()
                    .map(|n| n.max(0) as u64)
                    .map_err(|_| StoreError::Corrupt(format!("old setting {name} {value:?}")))
            })
            .transpose()
    };
    let flag = |name: &str| text(name) == Some("1");
    let owned = |name: &str| text(name).map(str::to_owned);
    Ok(Settings {
        admission_rate_per_sec: text("rate")
            .and_then(|rate| rate.parse().ok())
            .ok_or_else(|| StoreError::Corrupt("old settings without a rate".into()))?,
        paused: flag("paused"),
        token_ttl_ms: number("ttl_ms")?.unwrap_or(300_000),
        max_active_users: number("cap")?,
        checkout_url: owned("checkout"),
        share_token_with_embedder: flag("share"),
        abandon_after_ms: number("abandon_ms")?.unwrap_or_else(crate::default_abandon_after_ms),
        hold_place_ms: number("hold_ms")?.unwrap_or_else(crate::default_hold_place_ms),
        expected_checkout_ms: None,
        sale: SaleSettings {
            stock: number("stock")?,
            sold: number("sold")?.unwrap_or(0),
            sold_out: flag("soldout"),
            closed: flag("closed"),
            message_en: owned("msg_en"),
            message_ko: owned("msg_ko"),
        },
        opens_at_ms: number("opens_ms")?,
        prequeue_opens_at_ms: number("preopens_ms")?,
        pow_difficulty: number("pow")?.map_or(0, |bits| bits.min(u64::from(u8::MAX)) as u8),
        pow_auto_joins_per_sec: number("pow_auto")?,
        require_user_assertion: flag("req_user"),
        labels: RoomLabels {
            display_name_en: owned("name_en"),
            display_name_ko: owned("name_ko"),
            message_en: owned("wait_en"),
            message_ko: owned("wait_ko"),
        },
        queueing_method: text("qmethod")
            .and_then(QueueingMethod::parse)
            .unwrap_or_default(),
        auto_rate: None,
    })
}
