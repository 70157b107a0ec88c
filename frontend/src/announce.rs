//! When the screen-reader live region speaks about the place in line.
//!
//! The position can change every second; announcing each change would drown out everything else
//! a screen reader says. A change is spoken when the position crosses a notable step (100, 50,
//! 10, …) or when the last announcement is at least half a minute old. The last few places are
//! what a shopper waits for, so every change among them is spoken at once, however fast the
//! line moves.

use vestibule_shared::{RoomState, TicketState, TicketStatus};

use crate::sale_text::{sale_text, sold_out_detail, SaleText};

use crate::i18n::{say_position, t, Lang, Text};

/// Positions worth announcing as soon as the shopper reaches them.
const STEPS: [u64; 15] = [
    1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000,
];
/// Longest silence while the position keeps changing.
const MAX_SILENCE_MS: f64 = 30_000.0;
/// Shortest gap between two step announcements further back (steps pass quickly there).
const MIN_STEP_GAP_MS: f64 = 5_000.0;
/// Every change to a position at or below this is announced, with no gap.
const FRONT_OF_LINE: u64 = 5;

/// Remembers what was last announced about the position, and when.
#[derive(Debug, Default, Clone)]
pub struct PositionAnnouncer {
    last: Option<(u64, f64)>,
}

impl PositionAnnouncer {
    /// Whether a newly seen `position` should be announced at `now_ms`; records it if so.
    pub fn should_announce(&mut self, position: u64, now_ms: f64) -> bool {
        let speak = match self.last {
            None => true,
            Some((last_position, _)) if last_position == position => false,
            Some((last_position, at)) => {
                let silence = now_ms - at;
                let crossed = STEPS
                    .iter()
                    .any(|&step| position <= step && last_position > step);
                position <= FRONT_OF_LINE
                    || silence >= MAX_SILENCE_MS
                    || (crossed && silence >= MIN_STEP_GAP_MS)
            }
        };
        if speak {
            self.record(position, now_ms);
        }
        speak
    }

    /// Notes that the position was announced by other means (e.g. after a reconnect).
    pub fn record(&mut self, position: u64, now_ms: f64) {
        self.last = Some((position, now_ms));
    }
}

/// What the live region says about a newly seen ticket status, if anything.
///
/// `previous_room_state` is the room state of the last waiting status shown; `was_lost` says the
/// connection had been lost (the first news after it says "Reconnected" with the place).
pub fn status_announcement(
    lang: Lang,
    status: &TicketStatus,
    previous_room_state: Option<RoomState>,
    was_lost: bool,
    announcer: &mut PositionAnnouncer,
    now_ms: f64,
) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    match status.status {
        TicketState::Waiting => {
            let paused = status.room_state == RoomState::Paused;
            if paused && previous_room_state != Some(RoomState::Paused) {
                parts.push(t(lang, Text::SayPaused).to_owned());
            } else if !paused && previous_room_state == Some(RoomState::Paused) {
                parts.push(t(lang, Text::SayResumed).to_owned());
            } else if was_lost {
                parts.push(t(lang, Text::SayReconnected).to_owned());
            }
            if let Some(position) = status.position {
                if !parts.is_empty() {
                    announcer.record(position, now_ms);
                    parts.push(say_position(lang, position, status.eta_seconds));
                } else if announcer.should_announce(position, now_ms) {
                    parts.push(say_position(lang, position, status.eta_seconds));
                }
            }
        }
        // The headline says it; the place is announced once drawn (as WAITING).
        TicketState::PreQueue => {}
        TicketState::TokenIssued => parts.push(t(lang, Text::SayYourTurn).to_owned()),
        TicketState::Completed => parts.push(t(lang, Text::Completed).to_owned()),
        TicketState::Expired => parts.push(t(lang, Text::Expired).to_owned()),
        TicketState::Left => parts.push(t(lang, Text::Left).to_owned()),
        TicketState::SoldOut => {
            parts.push(sale_text(lang, SaleText::SoldOut).to_owned());
            parts.push(sold_out_detail(lang, status.sold_out_message.as_ref()));
        }
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_position_is_always_announced() {
        assert!(PositionAnnouncer::default().should_announce(742, 0.0));
    }

    #[test]
    fn small_moves_stay_silent_until_half_a_minute_passes() {
        let mut a = PositionAnnouncer::default();
        a.should_announce(742, 0.0);
        assert!(!a.should_announce(741, 1_000.0));
        assert!(!a.should_announce(730, 29_000.0));
        assert!(a.should_announce(720, 30_000.0));
        assert!(!a.should_announce(719, 31_000.0));
    }

    #[test]
    fn crossing_a_step_is_announced_but_not_more_than_every_five_seconds() {
        let mut a = PositionAnnouncer::default();
        a.should_announce(120, 0.0);
        assert!(!a.should_announce(101, 6_000.0));
        assert!(a.should_announce(99, 7_000.0));
        assert!(
            !a.should_announce(49, 8_000.0),
            "too soon after the last one"
        );
        assert!(a.should_announce(48, 12_000.0));
    }

    #[test]
    fn the_last_places_are_all_announced_however_fast_the_line_moves() {
        let mut a = PositionAnnouncer::default();
        a.should_announce(20, 0.0);
        assert!(!a.should_announce(12, 200.0), "too soon, not at the front");
        for (i, position) in [5, 4, 3, 2, 1].into_iter().enumerate() {
            assert!(
                a.should_announce(position, 300.0 + i as f64 * 100.0),
                "place {position}"
            );
        }
    }

    #[test]
    fn an_unchanged_position_is_never_repeated() {
        let mut a = PositionAnnouncer::default();
        a.should_announce(5, 0.0);
        assert!(!a.should_announce(5, 120_000.0));
    }

    fn waiting(position: u64) -> TicketStatus {
        serde_json::from_value(serde_json::json!({
            "ticketId": "t", "room": "main", "status": "WAITING", "position": position,
            "etaSeconds": 30, "nextPollAfterMs": 1000, "entryToken": null,
            "tokenExpiresAt": null, "checkoutUrl": null, "roomState": "OPEN"
        }))
        .expect("a TicketStatus")
    }

    #[test]
    fn the_turn_is_always_announced_and_a_reconnect_repeats_the_place() {
        let mut a = PositionAnnouncer::default();
        let mut turn = waiting(1);
        turn.status = TicketState::TokenIssued;
        let said = status_announcement(Lang::En, &turn, None, false, &mut a, 0.0);
        assert_eq!(said.as_deref(), Some(t(Lang::En, Text::SayYourTurn)));
        a.record(7, 0.0);
        let said = status_announcement(Lang::En, &waiting(7), None, true, &mut a, 1.0)
            .expect("a reconnect is announced");
        assert!(
            said.starts_with("Reconnected.") && said.contains("number 7"),
            "{said}"
        );
    }
}
