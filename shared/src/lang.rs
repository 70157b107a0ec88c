//! The two languages of the page and the console (English and Korean), shared by both apps so
//! they read `?lang=` and the browser's language the same way.

/// A shopper's or operator's language: from `?lang=`, else the browser's, else English.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// English (`en`).
    En,
    /// Korean (`ko`).
    Ko,
}

impl Lang {
    /// The BCP 47 tag written to `<html lang>` and `?lang=`, e.g. `"ko"`.
    pub fn code(self) -> &'static str {
        match self {
            Self::En => "en",
            Self::Ko => "ko",
        }
    }

    /// The language a tag such as `"ko-KR"` or `"en"` asks for; `None` for any other language.
    pub fn from_tag(tag: &str) -> Option<Self> {
        let primary = tag.split(['-', '_']).next()?.trim().to_ascii_lowercase();
        match primary.as_str() {
            "ko" => Some(Self::Ko),
            "en" => Some(Self::En),
            _ => None,
        }
    }

    /// The other language, for the switch link.
    pub fn other(self) -> Self {
        match self {
            Self::En => Self::Ko,
            Self::Ko => Self::En,
        }
    }

    /// The language's own name, shown on the switch link that leads to it.
    pub fn native_name(self) -> &'static str {
        match self {
            Self::En => "English",
            Self::Ko => "한국어",
        }
    }
}
