//! A room's settings and its scheduler lease: `init_room.lua`, `update_room.lua`, `lease.lua`,
//! `release_lease.lua`, and the settings read.

use redis::Value;

use super::reply::{
    as_i64, as_string, as_u64, parse_versioned, split_sale, with_schedule, SALE_FIELDS,
};
use super::{fresh_secret, Keys, RedisStore};
use crate::store::{
    LeaseOutcome, Pace, Settings, SettingsPatch, SettingsUpdate, StoreError, VersionedSettings,
};

/// What an `update_room.lua` call is.
#[derive(Clone, Copy)]
pub(super) enum UpdateStep {
    /// An admin change.
    Change,
    /// A create's last step, at the room's first version: removes the tombstone.
    Create(u64),
    /// A room whose settings the store lost, written back whole at this version, only if still
    /// missing.
    Restore(u64),
}

/// Why `init_room.lua` runs.
#[derive(Clone, Copy)]
pub(super) enum InitStep {
    /// `--rooms` seeding (a deleted room's tombstone goes: it lives again).
    Seed,
    /// A create's step: the tombstone stays until its last step.
    Create,
}

impl RedisStore {
    /// A room's settings and secret written unless present (`init_room.lua`), and the slug
    /// listed (a seeded room, or one the store lost). Returns the settings in force.
    pub(super) async fn init_room_in_redis(
        &self,
        room: &str,
        defaults: &Settings,
    ) -> Result<VersionedSettings, StoreError> {
        let in_force = self
            .write_initial_settings(room, defaults, InitStep::Seed)
            .await?;
        // Listed with the rooms (issue 14): `--rooms` seeds a room that does not exist yet.
        self.register_room(room, None).await?;
        Ok(in_force)
    }

    /// `init_room.lua`: the settings and secret written unless present, the ones in force read
    /// back; the tombstone removed in the same step, or for a create kept (it removes it with
    /// its last step, [`RedisStore::update_room_in_redis`] with [`UpdateStep::Create`]). The slug's
    /// listing is the caller's.
    pub(super) async fn write_initial_settings(
        &self,
        room: &str,
        defaults: &Settings,
        step: InitStep,
    ) -> Result<VersionedSettings, StoreError> {
        let keys = Keys::new(room);
        let mut connection = self.link.connection.clone();
        let mut invocation = self.scripts.init_room.key(keys.key("settings"));
        invocation.key(keys.key("secret")).key(keys.key(GONE));
        config_args(&mut invocation, defaults);
        invocation.arg(&fresh_secret()[..]);
        config_args_added(&mut invocation, defaults);
        invocation.arg(crate::store::catalog::first_version()).arg(
            if matches!(step, InitStep::Create) {
                "1"
            } else {
                ""
            },
        );
        let fields: Vec<Value> = self
            .link
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        let (fields, sale, labels, method) = split_sale(&fields)?;
        let [settings @ .., secret, opens, preopens] = fields else {
            return Err(StoreError::Corrupt("init_room reply is short".into()));
        };
        self.remember_secret(room, secret, true)?;
        let mut versioned = with_schedule(
            parse_versioned(settings)?,
            &[opens.clone(), preopens.clone()],
        )?;
        versioned.settings.sale = sale;
        versioned.settings.labels = labels;
        versioned.settings.queueing_method = method;
        Ok(versioned)
    }

    pub(super) async fn room_settings_in_redis(
        &self,
        room: &str,
    ) -> Result<VersionedSettings, StoreError> {
        let keys = Keys::new(room);
        let mut connection = self.link.connection.clone();
        // With the tombstone, in one round trip (one slot): a room being deleted, or created
        // and not written whole yet, has no settings to show (found by a probe: a create's first
        // step was read as the room's settings, the command line's defaults).
        let (fields, gone): (Vec<Value>, bool) = self
            .link
            .bounded(
                redis::pipe()
                    .cmd("HMGET")
                    .arg(keys.key("settings"))
                    .arg(&[
                        "rate",
                        "paused",
                        "ttl_ms",
                        "cap",
                        "checkout",
                        "share",
                        "abandon_ms",
                        "hold_ms",
                        "pow",
                        "pow_auto",
                        "req_user",
                        "ver",
                        "opens_ms",
                        "preopens_ms",
                    ])
                    .arg(&SALE_FIELDS)
                    .cmd("EXISTS")
                    .arg(keys.key(GONE))
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        if gone {
            return Err(StoreError::RoomDeleted(room.to_owned()));
        }
        if matches!(fields.first(), Some(Value::Nil)) {
            // No settings and no tombstone: lost by a Redis restart.
            return Err(settings_lost(room));
        }
        let (fields, sale, labels, method) = split_sale(&fields)?;
        let [settings @ .., opens, preopens] = fields else {
            return Err(StoreError::Corrupt("room settings need 14 fields".into()));
        };
        let mut versioned = with_schedule(
            parse_versioned(settings)?,
            &[opens.clone(), preopens.clone()],
        )?;
        versioned.settings.sale = sale;
        versioned.settings.labels = labels;
        versioned.settings.queueing_method = method;
        Ok(versioned)
    }

    /// `update_room.lua`: `patch` applied (only at `expected_version`, if given). With
    /// `create_version`, a create's last step: the version set to it, the settings written and
    /// the tombstone the create kept removed, in one step.
    pub(super) async fn update_room_in_redis(
        &self,
        room: &str,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
        step: UpdateStep,
    ) -> Result<SettingsUpdate, StoreError> {
        let keys = Keys::new(room);
        let unchanged = || "-".to_owned();
        let mut invocation = self.scripts.update_room.key(keys.key("settings"));
        invocation
            .key(keys.key("lottery"))
            .key(keys.key("lottery_mac"))
            .key(keys.key("lottery_filing"))
            .key(keys.key("left_count"))
            .key(keys.key(GONE));
        invocation
            .arg(expected_version.map(|v| v.to_string()).unwrap_or_default())
            .arg(
                patch
                    .admission_rate_per_sec
                    .map_or_else(unchanged, |rate| rate.to_string()),
            )
            .arg(patch.paused.map_or_else(unchanged, |paused| {
                if paused { "1" } else { "0" }.to_owned()
            }))
            .arg(
                patch
                    .token_ttl_ms
                    .map_or_else(unchanged, |ttl| ttl.to_string()),
            )
            .arg(patch.max_active_users.map_or_else(unchanged, |cap| {
                cap.map(|c| c.to_string()).unwrap_or_default()
            }))
            .arg(
                patch
                    .checkout_url
                    .as_ref()
                    .map_or_else(unchanged, |url| url.clone().unwrap_or_default()),
            )
            .arg(
                patch
                    .share_token_with_embedder
                    .map_or_else(unchanged, |share| if share { "1" } else { "0" }.to_owned()),
            )
            .arg(
                patch
                    .abandon_after_ms
                    .map_or_else(unchanged, |ms| ms.to_string()),
            )
            .arg(
                patch
                    .hold_place_ms
                    .map_or_else(unchanged, |ms| ms.to_string()),
            )
            .arg(
                patch
                    .pow_difficulty
                    .map_or_else(unchanged, |bits| bits.to_string()),
            )
            .arg(patch.pow_auto_joins_per_sec.map_or_else(unchanged, |auto| {
                auto.map(|per_sec| per_sec.to_string()).unwrap_or_default()
            }))
            .arg(
                patch
                    .require_user_assertion
                    .map_or_else(unchanged, |on| if on { "1" } else { "0" }.to_owned()),
            );
        for time in [patch.opens_at_ms, patch.prequeue_opens_at_ms] {
            invocation.arg(time.map_or_else(unchanged, |at| {
                at.map(|ms| ms.to_string()).unwrap_or_default()
            }));
        }
        let flag = |on: bool| if on { "1" } else { "0" }.to_owned();
        let sale = &patch.sale;
        invocation
            .arg(sale.stock.map_or_else(unchanged, |stock| {
                stock.map(|units| units.to_string()).unwrap_or_default()
            }))
            .arg(sale.sold_out.map_or_else(unchanged, flag))
            .arg(sale.closed.map_or_else(unchanged, flag))
            .arg(
                sale.message_en
                    .as_ref()
                    .map_or_else(unchanged, |text| text.clone().unwrap_or_default()),
            )
            .arg(
                sale.message_ko
                    .as_ref()
                    .map_or_else(unchanged, |text| text.clone().unwrap_or_default()),
            );
        // "-" = unchanged, else "=" and the value: a label may be "-" itself.
        for label in patch.labels.fields() {
            invocation.arg(label.as_ref().map_or_else(unchanged, |text| {
                format!("={}", text.as_deref().unwrap_or_default())
            }));
        }
        invocation
            .arg(
                patch
                    .queueing_method
                    .map_or_else(unchanged, |method| method.as_str().to_owned()),
            )
            .arg(match step {
                UpdateStep::Create(version) => version.to_string(),
                _ => String::new(),
            })
            .arg(match step {
                UpdateStep::Restore(version) => version.to_string(),
                _ => String::new(),
            });
        let reply = self.link.run_script(&invocation).await?;
        match reply.as_slice() {
            [code] if as_i64(code)? == -1 => return Err(StoreError::RoomDeleted(room.to_owned())),
            [code] if as_i64(code)? == -2 => return Err(settings_lost(room)),
            _ => {}
        }
        let (reply, sale, labels, method) = split_sale(&reply)?;
        let [applied, settings @ .., opens, preopens] = reply else {
            return Err(StoreError::Corrupt("update_room reply is short".into()));
        };
        let mut in_force = with_schedule(
            parse_versioned(settings)?,
            &[opens.clone(), preopens.clone()],
        )?;
        in_force.settings.sale = sale;
        in_force.settings.labels = labels;
        in_force.settings.queueing_method = method;
        self.note_lottery(room, method.is_random());
        // A switch to random files every waiting ticket under its key before answering
        // (lottery_file.lua, in batches); until then nobody is admitted.
        if as_i64(applied)? == 1 && patch.queueing_method.is_some_and(|m| m.is_random()) {
            self.file_lottery(room).await?;
        }
        Ok(if as_i64(applied)? == 1 {
            SettingsUpdate::Applied(in_force)
        } else {
            SettingsUpdate::VersionMismatch(in_force)
        })
    }

    pub(super) async fn lease_in_redis(
        &self,
        room: &str,
        holder: &str,
        lease_ms: u64,
    ) -> Result<LeaseOutcome, StoreError> {
        let keys = Keys::new(room);
        // This process's copy of the room secret goes along, so that a Redis restarted without
        // persistence gets the same secret back and retried joins keep finding their tickets.
        let secret = self.cached_secret(room);
        let mut invocation = self.scripts.lease.key(keys.key("leader"));
        invocation
            .key(keys.key("epoch"))
            .key(keys.key("settings"))
            .key(keys.key("secret"))
            .key(keys.key("active"))
            .key(keys.key("pace"))
            .key(keys.key(GONE))
            .arg(holder)
            .arg(lease_ms)
            .arg(secret.as_deref().unwrap_or_default());
        let reply = self.link.run_script(&invocation).await?;
        if is_gone_reply(&reply) {
            return Err(StoreError::RoomDeleted(room.to_owned()));
        }
        if matches!(reply.as_slice(), [code] if as_i64(code).is_ok_and(|code| code == -2)) {
            return Err(settings_lost(room));
        }
        let (reply, sale, labels, method) = split_sale(&reply)?;
        let [epoch, settings @ .., secret, active, pace, opens, preopens] = reply else {
            return Err(StoreError::Corrupt("lease reply needs 24 fields".into()));
        };
        self.remember_secret(room, secret, false)?;
        let epoch = as_u64(epoch)?;
        let mut settings = with_schedule(
            parse_versioned(settings)?,
            &[opens.clone(), preopens.clone()],
        )?;
        settings.settings.sale = sale;
        settings.settings.labels = labels;
        settings.settings.queueing_method = method;
        Ok(LeaseOutcome {
            epoch: (epoch > 0).then_some(epoch),
            settings,
            active: as_u64(active)?,
            pace: Pace::decode(&as_string(pace)?),
        })
    }

    pub(super) async fn release_lease_in_redis(
        &self,
        room: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.release_lease.key(keys.key("leader"));
        invocation.arg(holder);
        let mut connection = self.link.connection.clone();
        self.link
            .bounded(invocation.invoke_async::<i64>(&mut connection))
            .await
            .map(drop)
    }
}

/// A room's settings as script arguments: rate, paused (`1`/`0`), TTL in ms, cap (`""` = none).
fn config_args(invocation: &mut redis::ScriptInvocation<'_>, config: &Settings) {
    invocation
        .arg(config.admission_rate_per_sec)
        .arg(if config.paused { "1" } else { "0" })
        .arg(config.token_ttl_ms)
        .arg(
            config
                .max_active_users
                .map(|cap| cap.to_string())
                .unwrap_or_default(),
        )
        .arg(config.checkout_url.as_deref().unwrap_or_default())
        .arg(if config.share_token_with_embedder {
            "1"
        } else {
            "0"
        })
        .arg(config.abandon_after_ms)
        .arg(config.hold_place_ms);
}

/// The settings fields added after the first eight (issue 16: proof of work, user assertions),
/// passed after each script's other arguments: pow bits, pow_auto (`""` = fixed), req_user.
fn config_args_added(invocation: &mut redis::ScriptInvocation<'_>, config: &Settings) {
    invocation
        .arg(config.pow_difficulty)
        .arg(
            config
                .pow_auto_joins_per_sec
                .map(|per_sec| per_sec.to_string())
                .unwrap_or_default(),
        )
        .arg(if config.require_user_assertion {
            "1"
        } else {
            "0"
        });
}

/// The key of a room's tombstone (`vestibule:{r}:gone`, Unix ms of the deletion): written by a
/// deletion before the room's other keys go, removed when the slug is created again. Scripts that
/// would write a room's settings back (`lease.lua`) or change them (`update_room.lua`) refuse
/// while it is there, so a replica that has not seen the deletion yet leaves nothing behind.
pub(super) const GONE: &str = "gone";

/// Whether a script answered `{-1}`: the room's tombstone is there.
fn is_gone_reply(reply: &[Value]) -> bool {
    matches!(reply, [code] if as_i64(code).is_ok_and(|code| code == -1))
}

/// The error for a room whose settings hash is missing without a tombstone: a Redis restarted
/// without persistence lost it, and the room's scheduler writes it back within a tick.
pub(super) fn settings_lost(room: &str) -> StoreError {
    StoreError::SettingsLost(room.to_owned())
}
