//! A room's words for people, kept with its settings: its display name and the
//! message to waiters, each in English and Korean. Bounds in `vestibule_shared::settings` (names
//! ≤ 100, messages ≤ 280 chars).

/// Display names and the message to waiters; `None` = none.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomLabels {
    /// The room's name for people, English (`None` = the slug).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name_en: Option<String>,
    /// The room's name for people, Korean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name_ko: Option<String>,
    /// The message to waiters, English, shown above the position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_en: Option<String>,
    /// The message to waiters, Korean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ko: Option<String>,
}

/// A partial change of [`RoomLabels`]: `None` = unchanged, `Some(None)` = cleared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelsPatch {
    /// New English display name.
    pub display_name_en: Option<Option<String>>,
    /// New Korean display name.
    pub display_name_ko: Option<Option<String>>,
    /// New English message to waiters.
    pub message_en: Option<Option<String>>,
    /// New Korean message to waiters.
    pub message_ko: Option<Option<String>>,
}

impl RoomLabels {
    /// These labels with `patch` applied.
    pub fn patched(&self, patch: &LabelsPatch) -> Self {
        let pick = |new: &Option<Option<String>>, old: &Option<String>| {
            new.clone().unwrap_or_else(|| old.clone())
        };
        Self {
            display_name_en: pick(&patch.display_name_en, &self.display_name_en),
            display_name_ko: pick(&patch.display_name_ko, &self.display_name_ko),
            message_en: pick(&patch.message_en, &self.message_en),
            message_ko: pick(&patch.message_ko, &self.message_ko),
        }
    }

    /// A patch that sets every label to these values.
    pub fn as_patch(&self) -> LabelsPatch {
        LabelsPatch {
            display_name_en: Some(self.display_name_en.clone()),
            display_name_ko: Some(self.display_name_ko.clone()),
            message_en: Some(self.message_en.clone()),
            message_ko: Some(self.message_ko.clone()),
        }
    }
}
