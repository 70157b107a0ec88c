//! A room's state (`RoomState`): one function of its settings and the time, used by the room's
//! public view, every ticket status and the SSE hub (docs/DESIGN.md "Room state").

use vestibule_shared::{RoomState, SoldOutMessage, TicketState};

use vestibule_store::Settings;

/// The room's state at `now_ms` (Unix ms) from its settings, by precedence:
///
/// 1. `SOLD_OUT` — the sold-out mark (an operator's, a stock set to 0, or the last unit's order);
/// 2. `CLOSED` — closed to new joins;
/// 3. `PRE_QUEUE` — before a scheduled opening (`opensAt`);
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

/// Whether a scheduled opening (`opensAt`) is still ahead at `now_ms` (docs/DESIGN.md
/// "Scheduled opening and the draw").
fn scheduled_opening_ahead(settings: &Settings, now_ms: u64) -> bool {
    settings.opens_at_ms.is_some_and(|at| now_ms < at)
}

/// A ticket's state as shoppers see it: every ticket not yet admitted (waiting or in the
/// pre-queue, or skipped and still within its hold) is `SOLD_OUT` once the room is sold out. The store never rewrites
/// those tickets: the room's mark is applied here, at every read, so selling out costs one
/// write however many wait.
pub fn shown_state(state: TicketState, room: RoomState) -> TicketState {
    match (state, room) {
        (TicketState::Waiting | TicketState::PreQueue, RoomState::SoldOut) => TicketState::SoldOut,
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
    use vestibule_store::SaleSettings;

    fn settings(paused: bool, sale: SaleSettings) -> Settings {
        Settings {
            paused,
            sale,
            ..crate::test_settings::settings()
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
    fn a_room_is_pre_queue_until_its_opening_then_open_or_paused() {
        let mut scheduled = settings(true, SaleSettings::default());
        scheduled.opens_at_ms = Some(10_000);
        assert_eq!(room_state(&scheduled, 9_999), RoomState::PreQueue);
        assert_eq!(room_state(&scheduled, 10_000), RoomState::Paused);
        scheduled.paused = false;
        assert_eq!(room_state(&scheduled, 10_001), RoomState::Open);
        scheduled.sale.closed = true;
        assert_eq!(room_state(&scheduled, 0), RoomState::Closed);
    }

    #[test]
    fn only_tickets_not_yet_admitted_read_sold_out() {
        for waiting in [TicketState::Waiting, TicketState::PreQueue] {
            assert_eq!(
                shown_state(waiting, RoomState::SoldOut),
                TicketState::SoldOut
            );
        }
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
