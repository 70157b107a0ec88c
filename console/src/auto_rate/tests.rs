use vestibule_shared::auto_rate::{AutoRateFigures, AutoRateReason};

use super::*;
use crate::state::sample_figures;

const SETTING: AutoRate = AutoRate {
    min: 5.0,
    max: 40.0,
    target_p95_ms: 500,
    max_error_rate: 0.01,
    health_url: None,
};

fn signals(p95_ms: f64, error_rate: f64) -> OriginSignals {
    OriginSignals {
        requests: 400,
        p50_ms: p95_ms / 2.0,
        p95_ms,
        error_rate,
        in_flight: 12,
        sent: None,
        window_secs: None,
    }
}

fn change(reason: AutoRateReason, from: f64, to: f64) -> AutoRateChange {
    AutoRateChange {
        reason,
        from,
        to,
        at_ms: 100_000,
        p95_ms: Some(900.0),
        error_rate: Some(0.2),
    }
}

#[test]
fn numbers_read_as_a_person_writes_them() {
    assert_eq!(ms_text(899.6), "900 ms");
    assert_eq!(percent(0.2), "20%");
    assert_eq!(percent(0.0125), "1.25%");
    assert_eq!(percent(0.0), "0%");
    assert_eq!(percent(0.01), "1%");
    assert_eq!(
        bounds_line(Lang::En, &SETTING),
        "5–40/s · p95 ≤ 500 ms · errors ≤ 1%"
    );
    assert_eq!(
        bounds_line(Lang::Ko, &SETTING),
        "5–40/초 · p95 ≤ 500 ms · 오류율 ≤ 1%"
    );
}

#[test]
fn the_last_change_says_why_with_its_numbers_and_when() {
    let cut = change(AutoRateReason::LatencyHigh, 175.0, 148.8);
    assert_eq!(
        change_line(Lang::En, &cut, &SETTING, 112_400),
        "Cut: origin p95 over target (900 ms > 500 ms) · 175 → 148.8/s · 12 s ago"
    );
    assert_eq!(
        change_line(Lang::Ko, &cut, &SETTING, 112_400),
        "감속: 오리진 p95가 목표 초과 (900 ms > 500 ms) · 175 → 148.8/초 · 12초 전"
    );
    let errors = change(AutoRateReason::ErrorsHigh, 20.0, 14.0);
    assert_eq!(
        change_line(Lang::En, &errors, &SETTING, 100_000),
        "Cut: origin errors over limit (20% > 1%) · 20 → 14/s · 0 s ago"
    );
    let risen = AutoRateChange {
        p95_ms: Some(50.0),
        ..change(AutoRateReason::Headroom, 11.1, 12.1)
    };
    assert_eq!(
        change_line(Lang::En, &risen, &SETTING, 220_000),
        "Raised: origin well under its targets (p95 50 ms < 500 ms) · 11.1 → 12.1/s · 2 min ago"
    );
    // Read back from the audit log by a new leader: no numbers, still the reason.
    let from_audit = AutoRateChange {
        p95_ms: None,
        error_rate: None,
        ..change(AutoRateReason::LatencyHigh, 20.0, 11.1)
    };
    assert!(change_line(Lang::En, &from_audit, &SETTING, 100_000)
        .starts_with("Cut: origin p95 over target (500 ms) · 20 → 11.1/s"));
    let lost = change(AutoRateReason::SignalsLost, 11.0, 5.0);
    assert!(change_line(Lang::En, &lost, &SETTING, 100_000)
        .starts_with("Lowered to min: no signals from the origin for 10 s"));
}

#[test]
fn every_reason_has_words_in_both_languages() {
    use AutoRateReason::*;
    let origin = signals(450.0, 0.0);
    for reason in [
        Headroom,
        Probing,
        AtTarget,
        AtCapacity,
        LatencyHigh,
        LatencyRising,
        ErrorsHigh,
        Settling,
        LittleTraffic,
        SignalsStale,
        SignalsLost,
        AtMax,
        Drained,
    ] {
        for lang in [Lang::En, Lang::Ko] {
            let line = step_line(lang, reason, Some(&origin), &SETTING);
            let (verb, phrase) = line.split_once(": ").expect("verb: phrase");
            assert!(
                !verb.is_empty() && phrase.len() > 5,
                "{reason:?} {lang:?}: {line}"
            );
            assert!(!line.contains('?'), "{reason:?} {lang:?}: {line}");
        }
    }
    assert_eq!(
        step_line(Lang::En, Settling, Some(&origin), &SETTING),
        "Holding: the origin is draining its backlog after a cut"
    );
    assert_eq!(
        step_line(Lang::En, LatencyRising, Some(&origin), &SETTING),
        "Trimming: origin p95 rising (450 ms, target 500 ms)"
    );
}

#[test]
fn the_panel_shows_the_loop_and_the_origin_or_nothing() {
    let plain = sample_figures("main");
    assert_eq!(cells(Lang::En, &plain), None);
    assert!(lines(Lang::En, &plain, 0).is_empty());
    // Signals without the loop: the origin's figures alone.
    let watched = RoomFigures {
        origin: Some(signals(900.0, 0.002)),
        ..sample_figures("main")
    };
    let shown: Vec<_> = cells(Lang::En, &watched)
        .unwrap()
        .into_iter()
        .map(|(id, _, value)| (id, value))
        .collect();
    assert_eq!(
        shown,
        [
            ("origin-p95", "900 ms".to_owned()),
            ("origin-p50", "450 ms".to_owned()),
            ("origin-errors", "0.2%".to_owned()),
            ("origin-requests", "400 · 12 in flight".to_owned()),
        ]
    );
    // The loop on, stepped, not yet moved; then moved.
    let looped = RoomFigures {
        auto_rate: Some(AutoRateFigures {
            setting: SETTING,
            reason: Some(AutoRateReason::Settling),
            last_change: None,
        }),
        ..watched
    };
    let ids: Vec<_> = cells(Lang::En, &looped)
        .unwrap()
        .into_iter()
        .map(|(id, ..)| id)
        .collect();
    assert_eq!(ids[..2], ["auto-rate-now", "origin-p95"]);
    let words = lines(Lang::En, &looped, 0);
    assert_eq!(words[0].2, "5–40/s · p95 ≤ 500 ms · errors ≤ 1%");
    let words = &words[1..];
    assert_eq!(
        words[0].2,
        "Holding: the origin is draining its backlog after a cut"
    );
    assert_eq!(words[1].2, "none yet (the leader has not moved the rate)");
    assert_eq!(words.len(), 2, "no health URL, no line for it");
    // With a health URL: the last line says where the leader reads the signals.
    let mut polled = looped.clone();
    if let Some(auto) = polled.auto_rate.as_mut() {
        auto.setting.health_url = Some("https://shop.example/health".into());
    }
    let last = lines(Lang::Ko, &polled, 0).pop().expect("a line");
    assert_eq!(
        (last.0, last.1, last.2.as_str()),
        (
            "auto-health-url",
            Text::AutoSignalsFrom,
            "https://shop.example/health"
        )
    );
}

#[test]
fn origin_charts_follow_the_samples_in_percent() {
    let sample = |at_ms, p95: Option<f64>, target: Option<f64>| Sample {
        at_ms,
        waiting: 0.0,
        active: 0.0,
        configured: 20.0,
        admitted: None,
        p95_ms: p95,
        error_rate: p95.map(|_| 0.02),
        target_p95_ms: target,
        max_error_rate: target.map(|_| 0.01),
    };
    assert_eq!(origin_series(Lang::En, &[sample(1, None, None)]), None);
    let (p95, errors) = origin_series(
        Lang::En,
        &[
            sample(1, None, Some(500.0)),
            sample(2, Some(900.0), Some(500.0)),
        ],
    )
    .unwrap();
    assert_eq!(p95[0].points, [(2, 900.0)]);
    assert_eq!(p95[1].points, [(1, 500.0), (2, 500.0)]);
    assert!(p95[1].dashed);
    assert_eq!(errors[0].points, [(2, 2.0)]);
    assert_eq!(errors[1].points, [(1, 1.0), (2, 1.0)]);
}
