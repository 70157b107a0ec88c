//! A room's state (`RoomState`): one function of its settings and the time, used by the room's
//! public view, every ticket status and the SSE hub (docs/DESIGN.md "Room state").

use vestibule_shared::{RoomState, SoldOutMessage, TicketState};

use crate::store::Settings;

/// The room's state at `now_ms` (Unix ms) from its settings, by precedence:
///
/// 1. `SOLD_OUT` — the sold-out mark (an operator's, a stock set to 0, or the last unit's order);
/// 2. `CLOSED` — closed to new joins;
/// 3. `PRE_QUEUE` — before a scheduled opening (issue 13 part A: a room with an opening time
///    answers it here, from `now_ms`; this build has no scheduled opening, so never);
/// 4. `PAUSED` — admission stopped by an operator;
/// 5. `OPEN`.
pub fn room_state(settings: &Settings, now_ms: u64) -> RoomState {
    let before_opening = scheduled_opening_ahead(settings, now_ms);
    if settings.sale.sold_out {
        RoomState::SoldOut
    } else if settings.sale.closed {
        RoomState::Closed
    } else if before_opening {
        RoomState::PreQueue
    } else if settings.paused {
        RoomState::Paused
    } else {
        RoomState::Open
    }
}

/// Whether a scheduled opening is still ahead at `now_ms`. Rooms have no opening time in this
/// build (part A of issue 13 adds it to the settings), so none is.
fn scheduled_opening_ahead(_settings: &Settings, _now_ms: u64) -> bool {
    false
}

/// A ticket's state as shoppers see it: every ticket not yet admitted (waiting, or skipped and
/// still within its hold) is `SOLD_OUT` once the room is sold out. The store never rewrites
/// those tickets: the room's mark is applied here, at every read, so selling out costs one
/// write however many wait.
pub fn shown_state(state: TicketState, room: RoomState) -> TicketState {
    match (state, room) {
        (TicketState::Waiting, RoomState::SoldOut) => TicketState::SoldOut,
        (state, _) => state,
    }
}

/// The room's sold-out message as the API shows it.
pub fn sold_out_message(settings: &Settings) -> SoldOutMessage {
    SoldOutMessage {
        en: settings.sale.message_en.clone(),
        ko: settings.sale.message_ko.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SaleSettings;

    fn settings(paused: bool, sale: SaleSettings) -> Settings {
        Settings {
            admission_rate_per_sec: 10.0,
            paused,
            token_ttl_ms: 60_000,
            max_active_users: None,
            checkout_url: None,
            share_token_with_embedder: false,
            abandon_after_ms: 300_000,
            hold_place_ms: 0,
            sale,
        }
    }

    #[test]
    fn sold_out_beats_closed_beats_paused() {
        let open = SaleSettings::default();
        assert_eq!(
            room_state(&settings(false, open.clone()), 0),
            RoomState::Open
        );
        assert_eq!(room_state(&settings(true, open), 0), RoomState::Paused);
        let closed = SaleSettings {
            closed: true,
            ..SaleSettings::default()
        };
        assert_eq!(
            room_state(&settings(true, closed.clone()), 0),
            RoomState::Closed
        );
        let sold_out = SaleSettings {
            sold_out: true,
            ..closed
        };
        assert_eq!(room_state(&settings(true, sold_out), 0), RoomState::SoldOut);
    }

    #[test]
    fn only_tickets_not_yet_admitted_read_sold_out() {
        assert_eq!(
            shown_state(TicketState::Waiting, RoomState::SoldOut),
            TicketState::SoldOut
        );
        for kept in [
            TicketState::TokenIssued,
            TicketState::Completed,
            TicketState::Expired,
            TicketState::Left,
        ] {
            assert_eq!(shown_state(kept, RoomState::SoldOut), kept);
        }
        assert_eq!(
            shown_state(TicketState::Waiting, RoomState::Closed),
            TicketState::Waiting
        );
    }
}
