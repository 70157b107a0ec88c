//! The words of the page in both languages.
use super::*;

#[test]
fn eta_under_a_minute_is_said_as_less_than_a_minute() {
    assert_eq!(eta_words(Lang::En, 0), "less than a minute");
    assert_eq!(eta_words(Lang::Ko, 59), "1분 미만");
}

#[test]
fn eta_rounds_up_to_whole_minutes() {
    assert_eq!(eta_words(Lang::En, 120), "about 2 min");
    assert_eq!(eta_words(Lang::En, 121), "about 3 min");
    assert_eq!(eta_words(Lang::Ko, 120), "약 2분");
}

#[test]
fn the_eta_range_is_said_in_minutes_in_both_languages() {
    assert_eq!(eta_range_words(Lang::En, 150, 290), "about 3–5 min");
    assert_eq!(eta_range_words(Lang::Ko, 150, 290), "약 3~5분");
    // Ends that round alike, or a range under a minute: one figure.
    assert_eq!(eta_range_words(Lang::En, 130, 170), "about 3 min");
    assert_eq!(eta_range_words(Lang::En, 10, 40), "less than a minute");
    assert_eq!(
        eta_range_words(Lang::En, 3000, 5400),
        "about 50 min – 1 h 30 min"
    );
    assert_eq!(eta_range_words(Lang::Ko, 3600, 7200), "약 1시간~2시간");
}

#[test]
fn every_known_reason_has_words_in_both_languages() {
    use vestibule_shared::WaitReason;
    for reason in [
        WaitReason::Paused,
        WaitReason::RateLowered,
        WaitReason::CapReached,
        WaitReason::CheckoutSlow,
        WaitReason::StockHeld,
    ] {
        for lang in [Lang::En, Lang::Ko] {
            assert!(reason_words(lang, reason).is_some_and(|text| !text.is_empty()));
        }
    }
    assert_eq!(reason_words(Lang::En, WaitReason::Other), None);
}

#[test]
fn eta_over_an_hour_is_said_in_hours_and_minutes() {
    assert_eq!(eta_words(Lang::En, 3600), "about 1 h");
    assert_eq!(eta_words(Lang::En, 3700), "about 1 h 2 min");
    assert_eq!(eta_words(Lang::Ko, 7200), "약 2시간");
    assert_eq!(eta_words(Lang::Ko, 5400), "약 1시간 30분");
}

#[test]
fn language_tags_pick_korean_or_english_only() {
    assert_eq!(Lang::from_tag("ko-KR"), Some(Lang::Ko));
    assert_eq!(Lang::from_tag("KO"), Some(Lang::Ko));
    assert_eq!(Lang::from_tag("en_GB"), Some(Lang::En));
    assert_eq!(Lang::from_tag("fr"), None);
    assert_eq!(Lang::from_tag(""), None);
}

#[test]
fn the_live_region_says_how_many_are_ahead() {
    assert_eq!(
        say_position(Lang::En, 3, Some(30)),
        "You are number 3 in line, 2 ahead of you. Wait: less than a minute."
    );
    assert_eq!(
        say_position(Lang::Ko, 1, None),
        "대기 순번 1번, 앞에 0명이 있습니다."
    );
}
