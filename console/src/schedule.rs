//! What a room is doing, in words that are true: its state label from the server's state and
//! the two opening times (the server says `PRE_QUEUE` for the whole time before `opensAt`, also
//! while joins are still refused), the line with both times and a countdown, and why admission
//! is below the configured rate.

use vestibule_shared::admin_events::RoomFigures;
use vestibule_shared::{RoomState, WaitReason};

use crate::i18n::{t, Lang, Text};
use crate::local_time::Zone;

/// A room's state as the console shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// Before the pre-queue (or, without one, before the opening): joins are refused.
    NotOpen,
    /// Between `prequeueOpensAt` and `opensAt`: joins get a pre-queue place.
    PreQueue,
    Open,
    Paused,
    Closed,
    SoldOut,
}

/// The two opening times of a room, Unix ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Times {
    pub prequeue_ms: Option<i64>,
    pub opens_ms: Option<i64>,
}

/// The label of a room in `state` with `times` at `now_ms`. The server's state decides all but
/// one thing: whether its `PRE_QUEUE` (any time before the opening) takes joins yet. With no
/// times known (an older server, settings not read yet) the server's word stands.
pub fn label(state: RoomState, times: Times, now_ms: i64) -> Label {
    match state {
        RoomState::SoldOut => Label::SoldOut,
        RoomState::Closed => Label::Closed,
        RoomState::Paused => Label::Paused,
        RoomState::Open => Label::Open,
        RoomState::PreQueue => match times {
            Times {
                prequeue_ms: Some(at),
                ..
            } if now_ms >= at => Label::PreQueue,
            Times {
                prequeue_ms: None,
                opens_ms: None,
            } => Label::PreQueue,
            _ => Label::NotOpen,
        },
    }
}

/// "in 3 min", "in 45 s", "in 2 h 5 min".
fn countdown(lang: Lang, ms: i64) -> String {
    let secs = (ms + 999) / 1000;
    // Korean writes a unit right after its number ("3분"), English with a space ("3 min").
    let gap = if lang == Lang::Ko { "" } else { " " };
    let unit = |n: i64, unit: Text| format!("{n}{gap}{}", t(lang, unit));
    let span = if secs < 60 {
        unit(secs, Text::Seconds)
    } else if secs < 3600 {
        unit((secs + 59) / 60, Text::Minutes)
    } else {
        let minutes = (secs + 59) / 60;
        format!(
            "{} {}",
            unit(minutes / 60, Text::Hours),
            unit(minutes % 60, Text::Minutes)
        )
    };
    match lang {
        Lang::En => format!("in {span}"),
        Lang::Ko => format!("{span} 후"),
    }
}

/// "Pre-queue opens 14:05 (in 3 min) · Sale opens 14:10": each time set, in local time, with a
/// countdown to the next one ahead; `None` without a schedule.
pub fn schedule_line(lang: Lang, times: Times, now_ms: i64, zone: &dyn Zone) -> Option<String> {
    let today = zone.to_local(now_ms);
    let next = [times.prequeue_ms, times.opens_ms]
        .into_iter()
        .flatten()
        .find(|at| *at > now_ms);
    let part = |at: Option<i64>, ahead: Text, past: Text| {
        at.map(|at| {
            let words = t(lang, if at > now_ms { ahead } else { past });
            let clock = zone.to_local(at).clock(&today);
            let count = if Some(at) == next {
                format!(" ({})", countdown(lang, at - now_ms))
            } else {
                String::new()
            };
            format!("{words} {clock}{count}")
        })
    };
    let parts: Vec<String> = [
        part(times.prequeue_ms, Text::PrequeueOpens, Text::PrequeueOpened),
        part(times.opens_ms, Text::SaleOpens, Text::SaleOpened),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// Why admission is below the configured rate (or nil), most basic first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldBack {
    SoldOut,
    NotOpen,
    /// Before the opening, the pre-queue waits for the draw.
    PreQueue,
    Paused,
    RateZero,
    /// Every unit left is held by a token not yet used.
    StockHeld,
    /// As many tokens out as the cap allows.
    CapReached,
    /// What a shopper at the back of the line is told (the ETA's reason).
    Eta(WaitReason),
    NobodyWaiting,
}

/// Why `room` (shown as `label`, with the cap `cap` from its settings) admits less than its
/// configured rate; `None` when nothing holds it back.
pub fn held_back(label: Label, room: &RoomFigures, cap: Option<u64>) -> Option<HeldBack> {
    let stock_held = room
        .stock_left
        .is_some_and(|left| room.active_users >= left);
    let reason = match label {
        Label::SoldOut => HeldBack::SoldOut,
        Label::NotOpen => HeldBack::NotOpen,
        Label::PreQueue => HeldBack::PreQueue,
        _ if room.paused => HeldBack::Paused,
        _ if room.admission_rate_per_sec <= 0.0 => HeldBack::RateZero,
        _ if stock_held => HeldBack::StockHeld,
        _ if cap.is_some_and(|cap| room.active_users >= cap) => HeldBack::CapReached,
        _ => match room.reason {
            Some(reason) => HeldBack::Eta(reason),
            None if room.waiting == 0 => HeldBack::NobodyWaiting,
            None => return None,
        },
    };
    Some(reason)
}

#[cfg(test)]
mod tests;
