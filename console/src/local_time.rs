//! Times as the operator types and reads them (local wall-clock time, `<input
//! type="datetime-local">`'s `2026-11-27T14:05`) and as the admin API speaks them (RFC 3339, UTC).
//! The arithmetic is pure; only the time zone comes from the browser ([`Browser`]), so the unit
//! tests run it with a fixed offset ([`FixedOffset`]).

/// A local wall-clock time, to the second (a drop may open at 14:05:30).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LocalTime {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl LocalTime {
    /// Reads a `datetime-local` value (`YYYY-MM-DDTHH:MM`, or `…:SS` with any fraction
    /// dropped); `None` otherwise.
    pub fn parse(text: &str) -> Option<Self> {
        let (date, time) = text.trim().split_once(['T', ' '])?;
        let mut date = date.split('-');
        let mut time = time.split(':');
        let next = |part: Option<&str>| part.and_then(|p| p.parse::<u32>().ok());
        let (year, month, day) = (next(date.next())?, next(date.next())?, next(date.next())?);
        let (hour, minute) = (next(time.next())?, next(time.next())?);
        let second = match time.next() {
            None => 0,
            Some(second) => next(second.split('.').next())?,
        };
        let valid = (1970..=9999).contains(&year)
            && (1..=12).contains(&month)
            && (1..=31).contains(&day)
            && hour < 24
            && minute < 60
            && second < 60;
        valid.then_some(Self {
            year: year as i32,
            month,
            day,
            hour,
            minute,
            second,
        })
    }

    /// The `datetime-local` value (seconds only when not 0).
    pub fn input_value(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{}",
            self.year,
            self.month,
            self.day,
            self.hour_minute()
        )
    }

    /// `14:05`, or `14:05:30` when the seconds are not 0.
    fn hour_minute(&self) -> String {
        if self.second == 0 {
            format!("{:02}:{:02}", self.hour, self.minute)
        } else {
            format!("{:02}:{:02}:{:02}", self.hour, self.minute, self.second)
        }
    }

    /// `14:05` (`14:05:30` when the seconds are not 0), or `11-27 14:05` when not on `today`'s
    /// date.
    pub fn clock(&self, today: &LocalTime) -> String {
        self.dated(today, self.hour_minute())
    }

    /// `14:05:00`: always to the second, with the date when not on `today`'s.
    pub fn clock_to_second(&self, today: &LocalTime) -> String {
        let time = format!("{:02}:{:02}:{:02}", self.hour, self.minute, self.second);
        self.dated(today, time)
    }

    fn dated(&self, today: &LocalTime, time: String) -> String {
        if (self.year, self.month, self.day) == (today.year, today.month, today.day) {
            time
        } else {
            format!("{:02}-{:02} {time}", self.month, self.day)
        }
    }
}

/// Converts between local time and Unix ms.
pub trait Zone {
    /// The instant a local time names.
    fn to_ms(&self, local: LocalTime) -> i64;
    /// The local time of an instant.
    fn to_local(&self, ms: i64) -> LocalTime;
}

/// A zone at a fixed offset from UTC (minutes east), for tests.
#[cfg(test)]
pub struct FixedOffset(pub i64);

#[cfg(test)]
impl Zone for FixedOffset {
    fn to_ms(&self, local: LocalTime) -> i64 {
        utc_ms(local) - self.0 * 60_000
    }
    fn to_local(&self, ms: i64) -> LocalTime {
        utc_fields(ms + self.0 * 60_000)
    }
}

/// The browser's time zone (`Date`), daylight saving included.
pub struct Browser;

impl Zone for Browser {
    fn to_ms(&self, local: LocalTime) -> i64 {
        js_sys::Date::new_with_year_month_day_hr_min_sec(
            local.year as u32,
            local.month as i32 - 1,
            local.day as i32,
            local.hour as i32,
            local.minute as i32,
            local.second as i32,
        )
        .get_time() as i64
    }
    fn to_local(&self, ms: i64) -> LocalTime {
        let date = js_sys::Date::new(&(ms as f64).into());
        LocalTime {
            year: date.get_full_year() as i32,
            month: date.get_month() + 1,
            day: date.get_date(),
            hour: date.get_hours(),
            minute: date.get_minutes(),
            second: date.get_seconds(),
        }
    }
}

/// Days since 1970-01-01 of a civil date (H. Hinnant's algorithm).
fn days_from_civil(year: i32, month: u32, day: u32) -> i64 {
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let month = i64::from(month);
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The fields of a UTC instant (to the second).
fn utc_fields(ms: i64) -> LocalTime {
    let days = ms.div_euclid(86_400_000);
    let minutes = ms.rem_euclid(86_400_000) / 60_000;
    let second = (ms.rem_euclid(60_000) / 1000) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    LocalTime {
        year,
        month,
        day,
        hour: (minutes / 60) as u32,
        minute: (minutes % 60) as u32,
        second,
    }
}

/// The instant of fields read as UTC.
fn utc_ms(at: LocalTime) -> i64 {
    days_from_civil(at.year, at.month, at.day) * 86_400_000
        + i64::from(at.hour * 60 + at.minute) * 60_000
        + i64::from(at.second) * 1000
}

/// Unix ms as the admin API takes it: `2026-11-27T05:05:00Z`.
pub fn rfc3339(ms: i64) -> String {
    let at = utc_fields(ms);
    let secs = ms.rem_euclid(60_000) / 1000;
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{secs:02}Z",
        at.year, at.month, at.day, at.hour, at.minute
    )
}

/// Unix ms of an RFC 3339 time (`Z` or `±hh:mm`, any fraction); `None` when it is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let text = text.trim();
    let (body, offset_min) = if let Some(body) = text.strip_suffix(['Z', 'z']) {
        (body, 0)
    } else {
        let split = text.len().checked_sub(6)?;
        let (body, offset) = text.split_at(split);
        let sign = match offset.as_bytes().first()? {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        let (h, m) = offset[1..].split_once(':')?;
        (
            body,
            sign * (h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?),
        )
    };
    let (minute_part, seconds) = body.rsplit_once(':')?;
    let local = LocalTime::parse(minute_part)?;
    let seconds: f64 = seconds.parse().ok()?;
    Some(utc_ms(local) + (seconds * 1000.0) as i64 - offset_min * 60_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_inputs_become_utc_and_back() {
        let seoul = FixedOffset(9 * 60);
        let local = LocalTime::parse("2026-11-27T14:05").unwrap();
        let ms = seoul.to_ms(local);
        assert_eq!(rfc3339(ms), "2026-11-27T05:05:00Z");
        assert_eq!(parse_rfc3339("2026-11-27T05:05:00Z"), Some(ms));
        assert_eq!(parse_rfc3339("2026-11-27T14:05:00.000+09:00"), Some(ms));
        assert_eq!(seoul.to_local(ms).input_value(), "2026-11-27T14:05");
        assert_eq!(LocalTime::parse("2026-02-30x"), None);
        assert_eq!(parse_rfc3339("tomorrow"), None);
        // Across a year's end and before 1970's leap rules matter: 2024-02-29 exists.
        let leap = LocalTime::parse("2024-02-29T23:59").unwrap();
        assert_eq!(FixedOffset(0).to_local(utc_ms(leap)), leap);
    }

    #[test]
    fn seconds_are_kept_when_typed_and_shown_only_when_not_zero() {
        let seoul = FixedOffset(9 * 60);
        let local = LocalTime::parse("2026-11-27T14:05:30.250").unwrap();
        let ms = seoul.to_ms(local);
        assert_eq!(rfc3339(ms), "2026-11-27T05:05:30Z");
        assert_eq!(seoul.to_local(ms).input_value(), "2026-11-27T14:05:30");
        assert_eq!(local.clock(&local), "14:05:30");
        assert_eq!(LocalTime::parse("2026-11-27T14:05:61"), None);
        let whole = LocalTime::parse("2026-11-27T14:05:00").unwrap();
        assert_eq!(
            (whole.input_value().len(), whole.clock(&whole)),
            (16, "14:05".into())
        );
        assert_eq!(whole.clock_to_second(&whole), "14:05:00");
    }

    #[test]
    fn the_clock_names_the_date_only_on_another_day() {
        let today = LocalTime::parse("2026-11-27T09:00").unwrap();
        let at = LocalTime::parse("2026-11-27T14:05").unwrap();
        assert_eq!(at.clock(&today), "14:05");
        let later = LocalTime::parse("2026-11-28T08:00").unwrap();
        assert_eq!(later.clock(&today), "11-28 08:00");
    }
}
