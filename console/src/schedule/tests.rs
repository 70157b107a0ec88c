use vestibule_shared::admin_events::RoomFigures;
use vestibule_shared::{RoomState, WaitReason};

use super::*;
use crate::local_time::{FixedOffset, LocalTime};

const MIN: i64 = 60_000;

#[test]
fn pre_queue_only_once_joins_are_taken() {
    let times = Times {
        prequeue_ms: Some(10 * MIN),
        opens_ms: Some(15 * MIN),
    };
    assert_eq!(label(RoomState::PreQueue, times, 5 * MIN), Label::NotOpen);
    assert_eq!(label(RoomState::PreQueue, times, 10 * MIN), Label::PreQueue);
    let no_prequeue = Times {
        prequeue_ms: None,
        opens_ms: Some(15 * MIN),
    };
    assert_eq!(
        label(RoomState::PreQueue, no_prequeue, 12 * MIN),
        Label::NotOpen
    );
    assert_eq!(
        label(RoomState::PreQueue, Times::default(), 0),
        Label::PreQueue
    );
    assert_eq!(label(RoomState::Open, times, 16 * MIN), Label::Open);
    assert_eq!(label(RoomState::SoldOut, times, 5 * MIN), Label::SoldOut);
    assert_eq!(label(RoomState::Closed, times, 5 * MIN), Label::Closed);
}

#[test]
fn the_schedule_line_names_both_times_and_counts_down_to_the_next() {
    let utc = FixedOffset(0);
    let at = |text| utc.to_ms(LocalTime::parse(text).unwrap());
    let times = Times {
        prequeue_ms: Some(at("2026-11-27T14:05")),
        opens_ms: Some(at("2026-11-27T14:10")),
    };
    let now = at("2026-11-27T14:02");
    assert_eq!(
        schedule_line(Lang::En, times, now, &utc).unwrap(),
        "Pre-queue opens 14:05 (in 3 min) · Sale opens 14:10"
    );
    assert_eq!(
        schedule_line(Lang::Ko, times, now, &utc).unwrap(),
        "사전 대기 시작 14:05 (3분 후) · 판매 시작 14:10"
    );
    assert_eq!(
        schedule_line(Lang::En, times, at("2026-11-27T14:06") + 15_000, &utc).unwrap(),
        "Pre-queue opened 14:05 · Sale opens 14:10 (in 4 min)"
    );
    assert_eq!(
        schedule_line(Lang::En, times, at("2026-11-27T14:09") + 15_000, &utc).unwrap(),
        "Pre-queue opened 14:05 · Sale opens 14:10 (in 45 s)"
    );
    assert_eq!(schedule_line(Lang::En, Times::default(), now, &utc), None);
}

/// 10 waiting, none active, admitted at the rate.
fn figures() -> RoomFigures {
    RoomFigures {
        waiting: 10,
        active_users: 0,
        admitted_per_sec: Some(5.0),
        ..crate::state::sample_figures("drop")
    }
}

#[test]
fn admission_below_the_rate_always_has_a_reason() {
    let room = figures();
    assert_eq!(held_back(Label::Open, &room, None), None);
    assert_eq!(
        held_back(Label::NotOpen, &room, None),
        Some(HeldBack::NotOpen)
    );
    assert_eq!(
        held_back(Label::PreQueue, &room, None),
        Some(HeldBack::PreQueue)
    );
    assert_eq!(
        held_back(Label::SoldOut, &room, None),
        Some(HeldBack::SoldOut)
    );
    let paused = RoomFigures {
        paused: true,
        ..figures()
    };
    assert_eq!(
        held_back(Label::Paused, &paused, None),
        Some(HeldBack::Paused)
    );
    let zero = RoomFigures {
        admission_rate_per_sec: 0.0,
        ..figures()
    };
    assert_eq!(
        held_back(Label::Open, &zero, None),
        Some(HeldBack::RateZero)
    );
    let held = RoomFigures {
        stock_left: Some(5),
        active_users: 5,
        ..figures()
    };
    assert_eq!(
        held_back(Label::Open, &held, None),
        Some(HeldBack::StockHeld)
    );
    let capped = RoomFigures {
        active_users: 100,
        ..figures()
    };
    assert_eq!(
        held_back(Label::Open, &capped, Some(100)),
        Some(HeldBack::CapReached)
    );
    let slow = RoomFigures {
        reason: Some(WaitReason::CheckoutSlow),
        ..figures()
    };
    assert_eq!(
        held_back(Label::Open, &slow, None),
        Some(HeldBack::Eta(WaitReason::CheckoutSlow))
    );
    let empty = RoomFigures {
        waiting: 0,
        ..figures()
    };
    assert_eq!(
        held_back(Label::Open, &empty, None),
        Some(HeldBack::NobodyWaiting)
    );
}
