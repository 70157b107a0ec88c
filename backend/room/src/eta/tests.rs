//! Unit tests of `eta`.

use super::*;

#[test]
fn poll_tiers_must_ascend_and_end_with_a_catch_all() {
    assert!("10:3000,*:30000".parse::<PollTiers>().is_ok());
    assert!("100:3000,10:30000,*:1000".parse::<PollTiers>().is_err());
    assert!("10:3000".parse::<PollTiers>().is_err());
    assert!("10:500,*:3000".parse::<PollTiers>().is_err());
    assert!("x:3000,*:3000".parse::<PollTiers>().is_err());
}

fn tiers() -> PollTiers {
    "10:3000,100:10000,*:30000".parse().unwrap()
}

fn open(rate: f64) -> EtaInputs {
    EtaInputs {
        high_slowdown: HIGH_SLOWDOWN,
        rate_per_sec: rate,
        margin: 0.2,
        paused: false,
        max_active_users: None,
        active: 0,
        stock_left: None,
        token_ttl_secs: 300.0,
        expected_checkout_secs: 100.0,
        pace: Pace::default(),
        opens_in_secs: 0.0,
    }
}

/// Cap `cap` with `active` users, TTL 60 s, rate 20/s, and a measured finish rate.
fn capped(cap: u64, active: u64, finish_per_active_sec: Option<f64>) -> EtaInputs {
    EtaInputs {
        max_active_users: Some(cap),
        active,
        token_ttl_secs: 60.0,
        expected_checkout_secs: 20.0,
        pace: Pace {
            finish_per_active_sec,
            ..Pace::default()
        },
        ..open(20.0)
    }
}

#[test]
fn eta_is_position_over_rate_with_margin_and_null_while_paused() {
    let estimate = estimate(175, &open(175.0), &tiers());
    assert!((estimate.median_secs.unwrap() - 1.2).abs() < 1e-9);
    assert!((estimate.high_secs.unwrap() - 1.8).abs() < 1e-9);
    assert_eq!(estimate.reason, None);
    assert_eq!(estimate.basis, Some(EtaBasis::AdmissionRate));
    assert_eq!(eta_display_secs(1.2), 2);
    let paused = super::estimate(
        10,
        &EtaInputs {
            paused: true,
            ..open(175.0)
        },
        &tiers(),
    );
    assert_eq!((paused.median_secs, paused.high_secs), (None, None));
    assert_eq!(paused.reason, Some(WaitReason::Paused));
    assert_eq!(super::estimate(10, &open(0.0), &tiers()).median_secs, None);
}

#[test]
fn poll_hint_follows_tiers_at_their_edges_when_the_eta_is_long() {
    let slow = |p| estimate(p, &open(0.1), &tiers()).next_poll_after_ms;
    assert_eq!(slow(1), 3000);
    assert_eq!(slow(10), 3000);
    assert_eq!(slow(11), 10_000);
    assert_eq!(slow(100), 10_000);
    assert_eq!(slow(101), 30_000);
}

#[test]
fn poll_hint_never_exceeds_half_the_eta_nor_drops_under_a_second() {
    // 50 at 10/s: ETA 6 s → half is 3 s, under the 10 s tier.
    assert_eq!(estimate(50, &open(10.0), &tiers()).next_poll_after_ms, 3000);
    // 1 at 175/s: ETA 7 ms → floor of 1 s.
    assert_eq!(estimate(1, &open(175.0), &tiers()).next_poll_after_ms, 1000);
}

#[test]
fn while_paused_the_hint_follows_the_eta_at_the_configured_rate() {
    let paused = EtaInputs {
        paused: true,
        ..open(175.0)
    };
    // Place 121 at 175/s is under a second away once resumed: poll at the floor, not 30 s.
    assert_eq!(estimate(121, &paused, &tiers()).next_poll_after_ms, 1000);
    assert_eq!(
        estimate(500_000, &paused, &tiers()).next_poll_after_ms,
        30_000
    );
}

/// Every shopper who polls as told learns of a token within the notice target of its issue:
/// whatever the cap's state, the hint never reaches past the earliest possible admission
/// (position ÷ configured rate) by more than the target less the slack.
#[test]
fn no_hint_sleeps_past_the_earliest_admission_plus_the_notice_target() {
    let notice_ms = |inputs: &EtaInputs| notice_secs(inputs) * 1000.0;
    for inputs in [
        capped(20, 0, None),
        capped(20, 20, None),
        capped(20, 20, Some(0.01)),
        capped(5, 5, Some(0.5)),
        EtaInputs {
            stock_left: Some(3),
            active: 3,
            ..open(5.0)
        },
        open(175.0),
        EtaInputs {
            token_ttl_secs: 600.0,
            ..capped(20, 20, None)
        },
    ] {
        for position in [1, 2, 5, 20, 21, 40, 101, 120, 300, 5_000] {
            let hint = estimate(position, &inputs, &tiers()).next_poll_after_ms as f64;
            let earliest_ms = position as f64 / inputs.rate_per_sec * 1000.0;
            assert!(
                hint <= (earliest_ms + notice_ms(&inputs) - HINT_SLACK_MS as f64)
                    .max(MIN_POLL_AFTER_MS as f64),
                "{inputs:?} place {position}: hint {hint} ms"
            );
        }
    }
    // The cold start of a capped room: places 101–120 once got the 30 s tier; now each polls
    // by its earliest admission (5–6 s at 20/s) plus 2.5 s.
    let cold = capped(20, 0, None);
    assert_eq!(estimate(101, &cold, &tiers()).next_poll_after_ms, 7550);
    // A 10-minute TTL allows 30 s of notice: the hint may be longer.
    let long = EtaInputs {
        token_ttl_secs: 600.0,
        ..cold
    };
    assert_eq!(estimate(101, &long, &tiers()).next_poll_after_ms, 30_000);
}

#[test]
fn a_cap_on_active_users_slows_only_the_shoppers_it_will_hold_back() {
    let measured = |cap, active| EtaInputs {
        max_active_users: Some(cap),
        active,
        pace: Pace {
            finish_per_active_sec: Some(1.0 / 300.0),
            ..Pace::default()
        },
        ..open(10.0)
    };
    assert_eq!(admission_secs(30, &open(10.0)).1, 3.0);
    assert_eq!(admission_secs(30, &measured(500, 100)).1, 3.0);
    // Tokens held to their TTL: 500 per 300 s past the free slots.
    let secs = admission_secs(500, &measured(500, 100)).1;
    assert!(
        (secs - (40.0 + 100.0 * 300.0 / 500.0)).abs() < 1e-9,
        "{secs}"
    );
    assert!((admission_secs(5, &measured(500, 500)).1 - 3.0).abs() < 1e-9);
}

#[test]
fn before_any_checkout_is_measured_the_expected_checkout_sets_the_pace() {
    // Cap 20, rate 20/s, TTL 60 s, 300 shoppers at once; the room expects 3 s checkouts.
    let cold = EtaInputs {
        expected_checkout_secs: 3.0,
        ..capped(20, 0, None)
    };
    // 20 at once, then 280 at 20 ÷ (3 s + 1.5 s to notice) per second: 64 s, × 1.2.
    let estimate = estimate(300, &cold, &tiers());
    let median = estimate.median_secs.unwrap();
    assert!(
        (median - (1.0 + 280.0 * 4.5 / 20.0) * 1.2).abs() < 1e-6,
        "{median}"
    );
    assert_eq!(estimate.basis, Some(EtaBasis::ExpectedCheckout));
    // The high end allows checkouts twice as long (and the rate falling by a third).
    let high = estimate.high_secs.unwrap();
    assert!(
        high > median * 2.0 * HIGH_SLOWDOWN * 0.9,
        "{high} vs {median}"
    );
    // Held back by the cap, and nothing says checkout is slow.
    assert_eq!(estimate.reason, Some(WaitReason::CapReached));
    // The default expectation: a third of the TTL, never longer than the TTL itself.
    let settings: Settings = serde_json::from_value(serde_json::json!({
        "admissionRatePerSec": 20.0, "paused": false, "tokenTtlMs": 60_000,
        "maxActiveUsers": 20,
    }))
    .expect("settings");
    assert_eq!(settings.expected_checkout_secs(), 20.0);
    let inputs = EtaInputs::for_room(&settings, 0, Pace::default(), 0.2);
    let (_, secs, _, _) = admission_secs(300, &inputs);
    assert!((secs - (1.0 + 280.0 * 21.5 / 20.0)).abs() < 1e-6, "{secs}");
}

#[test]
fn no_checkout_is_called_slow_before_one_was_measured() {
    let cold = capped(20, 20, None);
    assert!(cold.pace.finish_per_active_sec.is_none());
    // Place 300 behind a full cap of 20, nothing measured: held back by the cap, not slow.
    assert_eq!(reason(300, &cold), Some(WaitReason::CapReached));
    // Measured: no finish at all over the window is slow.
    assert_eq!(
        reason(300, &capped(20, 20, Some(0.0))),
        Some(WaitReason::CheckoutSlow)
    );
}

#[test]
fn under_a_cap_the_measured_finish_rate_sets_the_pace() {
    // Cap 20, TTL 60 s, rate 20/s, shoppers order within ~1 s.
    let inputs = capped(20, 20, Some(0.2));
    // 20 × 0.2 = 4 per second: place 268 waits about 67 s, not 804 s.
    let (low, median, high, basis) = admission_secs(268, &inputs);
    assert!(low < median);
    assert!((median - 67.0).abs() < 1e-9, "{median}");
    // The high end allows checkouts twice as long as measured.
    assert!(high > median * 2.0 && high < median * 2.4, "{high}");
    assert_eq!(basis, EtaBasis::MeasuredCheckout);
    let estimate = estimate(268, &inputs, &tiers());
    assert_eq!(estimate.reason, Some(WaitReason::CapReached));
    // Shoppers who hold their slots most of the TTL: checkout is slow.
    assert_eq!(
        super::estimate(268, &capped(20, 20, Some(1.0 / 50.0)), &tiers()).reason,
        Some(WaitReason::CheckoutSlow)
    );
}

#[test]
fn stock_held_by_unused_tokens_waits_for_their_expiry_and_says_so() {
    // Rate 5, stock 3, three tokens out: place 37 waits for tokens to expire, however fast
    // checkouts were measured (an order takes its unit with its slot).
    let held = EtaInputs {
        stock_left: Some(3),
        active: 3,
        token_ttl_secs: 30.0,
        pace: Pace {
            finish_per_active_sec: Some(1.0),
            ..Pace::default()
        },
        ..open(5.0)
    };
    let estimate = estimate(37, &held, &tiers());
    assert_eq!(estimate.reason, Some(WaitReason::StockHeld));
    assert_eq!(estimate.basis, Some(EtaBasis::TokenTtl));
    // 37 places, 3 units freeing per 30 s: 370 s, not 9 s.
    let median = estimate.median_secs.unwrap();
    assert!((median - 370.0 * 1.2).abs() < 1e-6, "{median}");
    // Stock that does not bind (more units than the cap) leaves the cap's pace.
    let loose = EtaInputs {
        stock_left: Some(1_000),
        max_active_users: Some(3),
        ..held
    };
    assert_eq!(
        super::estimate(37, &loose, &tiers()).basis,
        Some(EtaBasis::MeasuredCheckout)
    );
    // Free units left: the first shoppers go at the rate.
    let free = EtaInputs { active: 1, ..held };
    assert_eq!(super::estimate(2, &free, &tiers()).reason, None);
}

#[test]
fn a_rate_lowered_below_what_was_achieved_is_the_reason() {
    let inputs = EtaInputs {
        pace: Pace {
            admitted_per_sec: Some(20.0),
            ..Pace::default()
        },
        ..open(10.0)
    };
    let estimate = estimate(100, &inputs, &tiers());
    assert_eq!(estimate.reason, Some(WaitReason::RateLowered));
    // The configured (lower) rate counts, not the measured one.
    assert!((estimate.median_secs.unwrap() - 12.0).abs() < 1e-9);
}

#[test]
fn a_measured_rate_below_the_configured_one_is_used() {
    let inputs = EtaInputs {
        pace: Pace {
            admitted_per_sec: Some(5.0),
            ..Pace::default()
        },
        ..open(10.0)
    };
    assert!((admission_secs(50, &inputs).1 - 10.0).abs() < 1e-9);
}

/// A line placed by its draw whose opening was then moved later: nobody is admitted before it,
/// so the estimate starts at the opening and the hint does not ask for a poll every second.
#[test]
fn a_line_held_for_a_later_opening_is_told_the_wait_from_the_opening() {
    let held = EtaInputs {
        opens_in_secs: 600.0,
        ..open(1.0)
    };
    let first = estimate(1, &held, &tiers());
    let open_now = estimate(1, &open(1.0), &tiers());
    let median = first.median_secs.unwrap();
    assert!(
        (median - (600.0 + open_now.median_secs.unwrap())).abs() < 1e-9,
        "{median}"
    );
    assert!(first.high_secs.unwrap() >= median);
    assert_eq!(first.next_poll_after_ms, tiers().after_ms(1));
    assert!(first.next_poll_after_ms > open_now.next_poll_after_ms);
}

#[test]
fn under_the_closed_loop_the_high_estimate_allows_the_rate_to_halve() {
    let mut settings = Settings {
        admission_rate_per_sec: 100.0,
        ..crate::test_settings::settings()
    };
    let fixed = EtaInputs::for_room(&settings, 0, Pace::default(), 0.2);
    settings.auto_rate = Some(vestibule_shared::auto_rate::AutoRate {
        min: 10.0,
        max: 400.0,
        target_p95_ms: 500,
        max_error_rate: 0.01,
        health_url: None,
    });
    let looped = EtaInputs::for_room(&settings, 0, Pace::default(), 0.2);
    assert_eq!(fixed.high_slowdown, HIGH_SLOWDOWN);
    assert_eq!(looped.high_slowdown, AUTO_RATE_HIGH_SLOWDOWN);
    // Place 1,000 at 100/s: 10 s, 12 s with the margin; the high end lets the rate fall by a
    // third (18 s) with a fixed rate, by half (24 s) under the loop. The median is the same.
    let fixed = estimate(1_000, &fixed, &tiers());
    let looped = estimate(1_000, &looped, &tiers());
    assert_eq!(fixed.median_secs, looped.median_secs);
    let high = |e: &Estimate| e.high_secs.expect("open");
    assert!((high(&fixed) - 18.0).abs() < 1e-9, "{fixed:?}");
    assert!((high(&looped) - 24.0).abs() < 1e-9, "{looped:?}");
}
