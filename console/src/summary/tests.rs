use vestibule_shared::admin_events::SaleSummary;

use super::*;
use crate::local_time::{FixedOffset, LocalTime};

fn sale(sold_out_at_ms: Option<u64>) -> SaleSummary {
    SaleSummary {
        room: "main".into(),
        joined: 5000,
        admitted: 1200,
        ordered: 1000,
        expired_unused: 150,
        waiting: 0,
        sold_out: sold_out_at_ms.is_some(),
        sold_out_at_ms,
        peak_waiting: 4100,
        longest_wait_secs: 1930,
    }
}

/// Unix ms of a UTC wall-clock time.
fn utc(text: &str) -> i64 {
    FixedOffset(0).to_ms(LocalTime::parse(text).unwrap())
}

fn values(lang: Lang, summary: &SaleSummary, zone: &impl Zone, now_ms: i64) -> Vec<String> {
    rows(lang, summary, zone, now_ms)
        .into_iter()
        .map(|(_, _, value)| value)
        .collect()
}

#[test]
fn waits_read_to_the_second_under_an_hour() {
    assert_eq!(wait_span(Lang::En, 0), "0 s");
    assert_eq!(wait_span(Lang::En, 42), "42 s");
    assert_eq!(wait_span(Lang::En, 120), "2 min");
    assert_eq!(wait_span(Lang::En, 1930), "32 min 10 s");
    assert_eq!(wait_span(Lang::En, 3720), "1 h 2 min");
    assert_eq!(wait_span(Lang::Ko, 1930), "32분 10초");
}

#[test]
fn the_summary_reads_in_both_languages() {
    let summary = sale(None);
    let now = utc("2026-11-27T05:10");
    assert_eq!(
        values(Lang::En, &summary, &FixedOffset(0), now),
        [
            "5000",
            "1200",
            "1000",
            "150",
            "4100",
            "32 min 10 s",
            "not sold out"
        ]
    );
    let ko = values(Lang::Ko, &summary, &FixedOffset(0), now);
    assert_eq!(ko[0], "5000");
    assert_eq!(ko[5], "32분 10초");
    assert_eq!(ko[6], "품절 전");
    let ids: Vec<_> = rows(Lang::En, &summary, &FixedOffset(0), now)
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(
        ids,
        [
            "sum-joined",
            "sum-admitted",
            "sum-ordered",
            "sum-expired",
            "sum-peak",
            "sum-longest",
            "sum-sold-out"
        ]
    );
}

#[test]
fn sold_out_shows_the_local_time_to_the_second() {
    let seoul = FixedOffset(9 * 60);
    // 05:05:32 UTC is 14:05:32 in Seoul, the same day there as `now`.
    let at = utc("2026-11-27T05:05") + 32_000;
    let summary = sale(Some(at as u64));
    let now = utc("2026-11-27T05:10");
    assert_eq!(values(Lang::En, &summary, &seoul, now)[6], "14:05:32");
    // Read the next day, it names its date.
    let next_day = now + 86_400_000;
    assert_eq!(local_clock(&seoul, at, next_day), "11-27 14:05:32");
    // Sold out without a time (an older server): it says so.
    let untimed = SaleSummary {
        sold_out: true,
        ..sale(None)
    };
    assert_eq!(values(Lang::En, &untimed, &seoul, now)[6], "yes");
}
