//! Rooms an earlier version of Vestibule wrote, moved into documents at start (README
//! "Upgrading"). Before documents, a room's settings were the hash `vestibule:{r}:settings`, its
//! deletion a tombstone `vestibule:{r}:gone`, and the catalog a set with two hashes (deletion
//! marks, incarnations), first under `vestibule:rooms…`, later under `vestibule:{_catalog}:…`.
//! Each such room becomes generation 0, whose keys are the old ones (`keys.rs`), so its waiting
//! line carries on; the old catalog keys go.

use std::collections::HashMap;

use super::keys::{slug_prefix, ROOMS_KEY};
use super::RedisStore;
use crate::store::{
    Catalog, QueueingMethod, RoomLabels, SaleSettings, Settings, StoreError, VersionedSettings,
};

/// The keys only an earlier version wrote: their presence is what asks for a migration.
const OLD_CATALOG: [&str; 5] = [
    "vestibule:rooms",
    "vestibule:rooms:deleted",
    "vestibule:rooms:incarnations",
    "vestibule:{_catalog}:deleted",
    "vestibule:{_catalog}:incarnations",
];

impl RedisStore {
    /// Moves the rooms an earlier version wrote into documents, once: only when a key of the
    /// old catalog is there (one `EXISTS` per start otherwise).
    pub(super) async fn migrate(&self) -> Result<(), StoreError> {
        let mut connection = self.link.connection.clone();
        let mut old = 0;
        for key in OLD_CATALOG {
            // One key a command: on a cluster the old names live on different slots.
            let found: i64 = self
                .link
                .bounded(redis::cmd("EXISTS").arg(key).query_async(&mut connection))
                .await?;
            old += found;
        }
        if old == 0 {
            return Ok(());
        }
        let mut slugs: Vec<String> = Vec::new();
        for key in [OLD_CATALOG[0], ROOMS_KEY] {
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
            let fields: HashMap<String, String> = self
                .link
                .bounded(
                    redis::cmd("HGETALL")
                        .arg(format!("{prefix}settings"))
                        .query_async(&mut connection),
                )
                .await?;
            let gone: i64 = self
                .link
                .bounded(
                    redis::cmd("EXISTS")
                        .arg(format!("{prefix}gone"))
                        .query_async(&mut connection),
                )
                .await?;
            if fields.is_empty() || gone == 1 || self.room_doc(slug).await?.is_some() {
                continue;
            }
            let held = VersionedSettings {
                settings: old_settings(&fields)?,
                generation: 0,
                version: fields.get("ver").and_then(|v| v.parse().ok()).unwrap_or(0),
            };
            self.restore_room(slug, &held).await?;
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
        for key in OLD_CATALOG {
            let _: i64 = self
                .link
                .bounded(redis::cmd("DEL").arg(key).query_async(&mut connection))
                .await?;
        }
        tracing::info!(
            rooms = moved,
            "moved the rooms of an earlier version into room documents"
        );
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
        abandon_after_ms: number("abandon_ms")?
            .unwrap_or_else(crate::store::default_abandon_after_ms),
        hold_place_ms: number("hold_ms")?.unwrap_or_else(crate::store::default_hold_place_ms),
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
    })
}
