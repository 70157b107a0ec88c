//! A room's settings as the store keeps them (store units: milliseconds), their patches and
//! versions. The admin API's view is `vestibule_shared::RoomSettings`; bounds in
//! `vestibule_shared::settings`.

use super::labels::{LabelsPatch, RoomLabels};
use super::sale::{SalePatch, SaleSettings};
pub use vestibule_shared::auto_rate::AutoRate;
pub use vestibule_shared::QueueingMethod;

/// A room's settings — the operator's live knobs — as the store keeps them (shared by every
/// replica). Durations in store units (milliseconds); the admin API shows them in seconds as
/// `vestibule_shared::RoomSettings` with live counts; bounds in `vestibule_shared::settings`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Shoppers admitted per second.
    pub admission_rate_per_sec: f64,
    /// Admission stopped.
    pub paused: bool,
    /// Entry token TTL in milliseconds.
    pub token_ttl_ms: u64,
    /// Cap on active users; `None` = no cap.
    pub max_active_users: Option<u64>,
    /// Where the page sends an admitted shopper; `None` = the demo checkout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout_url: Option<String>,
    /// Whether the page hands the entry token to the storefront embedding it.
    #[serde(default)]
    pub share_token_with_embedder: bool,
    /// A waiting ticket not heard from for this long (ms) is skipped (docs/DESIGN.md "Presence").
    #[serde(default = "default_abandon_after_ms")]
    pub abandon_after_ms: u64,
    /// A skipped ticket keeps its place this long (ms).
    #[serde(default = "default_hold_place_ms")]
    pub hold_place_ms: u64,
    /// How long a shopper is expected to hold a token before using it, ms: the ETA's pace under
    /// a cap until checkouts are measured; `None` = a third of the token TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_checkout_ms: Option<u64>,
    /// Stock, sold out and closing (docs/DESIGN.md "Stock and sold out").
    #[serde(default)]
    pub sale: SaleSettings,
    /// The scheduled opening, Unix ms (docs/DESIGN.md "Scheduled opening and the draw");
    /// `None` = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens_at_ms: Option<u64>,
    /// When the pre-queue opens, Unix ms (≤ `opens_at_ms`); `None` = no pre-queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prequeue_opens_at_ms: Option<u64>,
    /// Leading zero bits a join's proof of work needs; 0 = none (docs/bots.md).
    #[serde(default)]
    pub pow_difficulty: u8,
    /// Joins/s (per replica) from which the difficulty rises a bit per doubling; `None` = fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pow_auto_joins_per_sec: Option<u64>,
    /// Joins need a signed user assertion: one live ticket per user.
    #[serde(default)]
    pub require_user_assertion: bool,
    /// Display names and the message to waiters.
    #[serde(default)]
    pub labels: RoomLabels,
    /// Arrival order or the lottery (docs/DESIGN.md "Random queueing"); absent = FIFO.
    #[serde(default, skip_serializing_if = "is_fifo")]
    pub queueing_method: QueueingMethod,
    /// The closed loop (docs/DESIGN.md "Closed-loop admission"); `None` = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_rate: Option<AutoRate>,
}

fn is_fifo(method: &QueueingMethod) -> bool {
    !method.is_random()
}

/// `abandonAfterSecs`' default in ms (settings written before it existed read as this).
pub fn default_abandon_after_ms() -> u64 {
    vestibule_shared::settings::ABANDON_AFTER_SECS_DEFAULT * 1000
}

/// `holdPlaceSecs`' default in ms.
pub fn default_hold_place_ms() -> u64 {
    vestibule_shared::settings::HOLD_PLACE_SECS_DEFAULT * 1000
}

impl Settings {
    /// The expected checkout time in seconds: the room's setting, else a third of the token TTL
    /// (`vestibule_shared::RoomSettings::expected_checkout_secs`).
    pub fn expected_checkout_secs(&self) -> f64 {
        self.expected_checkout_ms
            .map_or(self.token_ttl_ms as f64 / 3.0, |ms| ms as f64)
            / 1000.0
    }
}

/// A partial change of [`Settings`]; `None` fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsPatch {
    /// New admission rate, shoppers per second.
    pub admission_rate_per_sec: Option<f64>,
    /// Pause or resume.
    pub paused: Option<bool>,
    /// New token TTL in milliseconds.
    pub token_ttl_ms: Option<u64>,
    /// New cap: `Some(None)` clears it.
    pub max_active_users: Option<Option<u64>>,
    /// New checkout URL: `Some(None)` = the demo checkout again.
    pub checkout_url: Option<Option<String>>,
    /// Share the entry token with the embedding storefront or not.
    pub share_token_with_embedder: Option<bool>,
    /// New abandon time, ms.
    pub abandon_after_ms: Option<u64>,
    /// New place-holding time, ms.
    pub hold_place_ms: Option<u64>,
    /// New expected checkout time, ms: `Some(None)` = a third of the token TTL.
    pub expected_checkout_ms: Option<Option<u64>>,
    /// Stock, sold out and closing.
    pub sale: SalePatch,
    /// New opening, Unix ms: `Some(None)` clears it.
    pub opens_at_ms: Option<Option<u64>>,
    /// New pre-queue opening, Unix ms: `Some(None)` clears it.
    pub prequeue_opens_at_ms: Option<Option<u64>>,
    /// New proof-of-work difficulty, bits.
    pub pow_difficulty: Option<u8>,
    /// New auto-rise threshold: `Some(None)` = fixed difficulty.
    pub pow_auto_joins_per_sec: Option<Option<u64>>,
    /// Require user assertions or not.
    pub require_user_assertion: Option<bool>,
    /// Display names and the message to waiters.
    pub labels: LabelsPatch,
    /// FIFO or random from now on.
    pub queueing_method: Option<QueueingMethod>,
    /// Turn the closed loop on or (`Some(None)`) off.
    pub auto_rate: Option<Option<AutoRate>>,
}

/// A live room's settings with its generation and version (`room_doc`): the version grows with
/// every change, so an operator can make a change conditional on what they last read
/// (`If-Match`).
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedSettings {
    /// The settings.
    pub settings: Settings,
    /// Which creation of the slug these are the settings of.
    pub generation: u64,
    /// The slug's counter at the last change (at the creation: the generation itself).
    pub version: u64,
}

/// The answer to a settings change.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingsUpdate {
    /// Applied; the settings now in force.
    Applied(VersionedSettings),
    /// Not applied: the settings were at another version than the caller expected; these are
    /// the settings in force.
    VersionMismatch(VersionedSettings),
}

impl Settings {
    /// A patch that sets every field to these settings' values.
    pub fn as_patch(&self) -> SettingsPatch {
        SettingsPatch {
            admission_rate_per_sec: Some(self.admission_rate_per_sec),
            paused: Some(self.paused),
            token_ttl_ms: Some(self.token_ttl_ms),
            max_active_users: Some(self.max_active_users),
            checkout_url: Some(self.checkout_url.clone()),
            share_token_with_embedder: Some(self.share_token_with_embedder),
            abandon_after_ms: Some(self.abandon_after_ms),
            hold_place_ms: Some(self.hold_place_ms),
            expected_checkout_ms: Some(self.expected_checkout_ms),
            sale: SalePatch {
                stock: Some(self.sale.stock),
                sold_out: Some(self.sale.sold_out),
                closed: Some(self.sale.closed),
                message_en: Some(self.sale.message_en.clone()),
                message_ko: Some(self.sale.message_ko.clone()),
            },
            opens_at_ms: Some(self.opens_at_ms),
            prequeue_opens_at_ms: Some(self.prequeue_opens_at_ms),
            pow_difficulty: Some(self.pow_difficulty),
            pow_auto_joins_per_sec: Some(self.pow_auto_joins_per_sec),
            require_user_assertion: Some(self.require_user_assertion),
            labels: self.labels.as_patch(),
            queueing_method: Some(self.queueing_method),
            auto_rate: Some(self.auto_rate.clone()),
        }
    }

    /// These settings with `patch` applied.
    pub fn patched(&self, patch: &SettingsPatch) -> Self {
        Self {
            admission_rate_per_sec: patch
                .admission_rate_per_sec
                .unwrap_or(self.admission_rate_per_sec),
            paused: patch.paused.unwrap_or(self.paused),
            token_ttl_ms: patch.token_ttl_ms.unwrap_or(self.token_ttl_ms),
            max_active_users: patch.max_active_users.unwrap_or(self.max_active_users),
            checkout_url: patch
                .checkout_url
                .clone()
                .unwrap_or_else(|| self.checkout_url.clone()),
            share_token_with_embedder: patch
                .share_token_with_embedder
                .unwrap_or(self.share_token_with_embedder),
            abandon_after_ms: patch.abandon_after_ms.unwrap_or(self.abandon_after_ms),
            hold_place_ms: patch.hold_place_ms.unwrap_or(self.hold_place_ms),
            expected_checkout_ms: patch
                .expected_checkout_ms
                .unwrap_or(self.expected_checkout_ms),
            sale: self.sale.patched(&patch.sale),
            opens_at_ms: patch.opens_at_ms.unwrap_or(self.opens_at_ms),
            prequeue_opens_at_ms: patch
                .prequeue_opens_at_ms
                .unwrap_or(self.prequeue_opens_at_ms),
            pow_difficulty: patch.pow_difficulty.unwrap_or(self.pow_difficulty),
            pow_auto_joins_per_sec: patch
                .pow_auto_joins_per_sec
                .unwrap_or(self.pow_auto_joins_per_sec),
            require_user_assertion: patch
                .require_user_assertion
                .unwrap_or(self.require_user_assertion),
            labels: self.labels.patched(&patch.labels),
            queueing_method: patch.queueing_method.unwrap_or(self.queueing_method),
            auto_rate: patch
                .auto_rate
                .clone()
                .unwrap_or_else(|| self.auto_rate.clone()),
        }
    }
}
