//! The leader's measured pace as the store keeps it for every replica (docs/DESIGN.md "ETA and
//! poll hints"); measured by `room::pace`.

/// What a room's leader measured of its admissions (docs/DESIGN.md "ETA and poll hints"),
/// published through the store so that every replica's ETAs use it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pace {
    /// Shoppers admitted per second over about the last minute, counting only ticks that left
    /// shoppers waiting and were not held back by the cap; `None` until measured.
    pub admitted_per_sec: Option<f64>,
    /// Finishes (orders, releases, expiries) per active shopper per second over about the last
    /// 15 s; `None` until measured.
    pub finish_per_active_sec: Option<f64>,
    /// The same over about the last 5 s, once that stretch should have seen two finishes at the
    /// 15-s rate; `None` until then. The high estimate takes the lower of the two, so a checkout
    /// that slows widens the range within seconds.
    pub recent_finish_per_active_sec: Option<f64>,
    /// The last tick left shoppers waiting because of the cap on active users.
    pub cap_limited: bool,
}

impl Pace {
    /// The store's text form: `"rate hazard cap recent"`, `-` for an unknown number, cap `0|1`
    /// (`recent` last, so a reader that knows only the first three still reads them).
    pub fn encode(&self) -> String {
        let number = |value: Option<f64>| value.map_or("-".to_owned(), |v| format!("{v:.6}"));
        format!(
            "{} {} {} {}",
            number(self.admitted_per_sec),
            number(self.finish_per_active_sec),
            u8::from(self.cap_limited),
            number(self.recent_finish_per_active_sec)
        )
    }

    /// Parses [`Pace::encode`]'s form; `None` for anything else (an empty or foreign value).
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split(' ');
        let mut number = || -> Option<Option<f64>> {
            match parts.next()? {
                "-" => Some(None),
                value => value
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(Some),
            }
        };
        let admitted_per_sec = number()?;
        let finish_per_active_sec = number()?;
        let cap_limited = match parts.next()? {
            "0" => false,
            "1" => true,
            _ => return None,
        };
        let recent_finish_per_active_sec = match parts.next() {
            None => None,
            Some("-") => None,
            Some(value) => Some(
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)?,
            ),
        };
        Some(Self {
            admitted_per_sec,
            finish_per_active_sec,
            recent_finish_per_active_sec,
            cap_limited,
        })
    }
}
