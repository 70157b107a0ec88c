//! A ticket's public status (`TicketStatus`): what join, poll and the SSE stream answer.
//!
//! A projection of the store's record, the room's settings and the configured ETA margin and
//! poll tiers; no I/O. The entry token is the store's token wrapped in a signed JWT
//! (`crate::tokens`), the same string on every call.

use vestibule_shared::{TicketState, TicketStatus};

use crate::options::RoomOptions;
use crate::public_state::{room_state, shown_state, sold_out_message};
use crate::RoomRuntime;
use crate::{eta, opening, presence};
use vestibule_store::{now_ms, TicketRecord};

/// The public status of a ticket: position, ETA range, reason and poll hint by the formulas of
/// docs/DESIGN.md ("ETA and poll hints"), from the room's settings and its leader's measured pace
/// as this process last read them. A ticket not yet admitted in a sold-out room is `SOLD_OUT`
/// ([`shown_state`]), with the room's message.
pub fn ticket_status(
    options: &RoomOptions,
    room: &RoomRuntime,
    record: &TicketRecord,
) -> TicketStatus {
    let shared = room.shared_settings();
    let settings = &shared.settings;
    let room_state = room_state(settings, now_ms());
    let state = shown_state(record.state, room_state);
    let record = &TicketRecord {
        state,
        ..record.clone()
    };
    let (estimate, next_poll_after_ms) = match (record.state, record.position) {
        (TicketState::Waiting, Some(position)) => {
            let inputs = eta::EtaInputs::for_room(
                settings,
                room.active_users(),
                room.pace(),
                options.eta_margin,
            );
            let estimate = eta::estimate(position, &inputs, &options.poll_tiers);
            let hint = estimate.next_poll_after_ms;
            (Some(estimate), hint)
        }
        (TicketState::PreQueue, _) => (
            None,
            opening::prequeue_poll_after_ms(
                &record.id,
                settings.opens_at_ms.unwrap_or(0),
                now_ms(),
                options.poll_tiers.after_ms(u64::MAX),
            ),
        ),
        _ => (None, options.poll_tiers.after_ms(u64::MAX)),
    };
    let eta_seconds = estimate
        .and_then(|estimate| estimate.median_secs)
        .map(eta::eta_display_secs);
    let eta_seconds_high = estimate
        .and_then(|estimate| estimate.high_secs)
        .map(eta::eta_display_secs);
    let issued = record.state == TicketState::TokenIssued;
    let waiting = matches!(record.state, TicketState::Waiting | TicketState::PreQueue);
    TicketStatus {
        ticket_id: record.id.clone(),
        room: room.name.clone(),
        status: record.state,
        position: record
            .position
            .filter(|_| record.state == TicketState::Waiting),
        eta_seconds,
        eta_seconds_high,
        reason: estimate.and_then(|estimate| estimate.reason),
        eta_basis: estimate.and_then(|estimate| estimate.basis),
        next_poll_after_ms,
        entry_token: record
            .entry_token
            .as_deref()
            .zip(record.token_expires_at_ms)
            .filter(|_| issued)
            .and_then(|(token, expires_at_ms)| {
                room.tokens.sign(
                    &room.name,
                    &record.id,
                    token,
                    expires_at_ms,
                    settings.token_ttl_ms,
                    now_ms(),
                )
            }),
        token_expires_at: record
            .token_expires_at_ms
            .filter(|_| issued)
            .map(rfc3339_from_ms),
        // A stored URL is checked again against today's `--cors-origins`: a storefront origin
        // dropped since (its domain may change hands) no longer receives shoppers. Without one,
        // gate mode sends the shopper to the room's first gated path (whenever the room was
        // created), else the demo checkout.
        checkout_url: issued.then(|| {
            let stored = settings.checkout_url.as_deref().filter(|url| {
                vestibule_shared::settings::check_checkout_url(url, &options.cors_origins).is_ok()
            });
            stored
                .map(str::to_owned)
                .or_else(|| (options.default_checkout)(&room.name))
                .unwrap_or_else(|| format!("{}checkout?room={}", options.page_base, room.name))
        }),
        room_state,
        place_kept: record.place_kept,
        sold_out_message: (state == TicketState::SoldOut).then(|| sold_out_message(settings)),
        opens_at: settings
            .opens_at_ms
            .filter(|at| record.state == TicketState::PreQueue || *at > now_ms())
            .map(rfc3339_from_ms),
        // The tag names the ticket's lottery key too (docs/DESIGN.md "Random queueing").
        ticket_tag: (opening::has_draw(settings) || settings.queueing_method.is_random())
            .then(|| vestibule_store::ids::log_tag(&record.id)),
        queueing_method: (settings.queueing_method.is_random() && waiting)
            .then_some(settings.queueing_method),
        // The message to waiters goes to tickets still in line.
        message_en: waiting
            .then(|| settings.labels.message_en.clone())
            .flatten(),
        message_ko: waiting
            .then(|| settings.labels.message_ko.clone())
            .flatten(),
        beyond_stock: beyond_stock(record, settings.sale.stock),
        // The page's title and heading name the room in every state.
        display_name_en: settings.labels.display_name_en.clone(),
        display_name_ko: settings.labels.display_name_ko.clone(),
        heartbeat_after_ms: matches!(record.state, TicketState::Waiting | TicketState::PreQueue)
            .then(|| {
                presence::heartbeat_after_ms(presence::effective_abandon_ms(
                    settings,
                    &options.poll_tiers,
                ))
            }),
    }
}

/// Whether a waiting ticket is behind more shoppers than there are units left: position >
/// `stock` (units left; `None` = unlimited). Those ahead may leave or let tokens expire, so
/// this says "unlikely", not "never" (docs/DESIGN.md "Stock and sold out").
pub fn beyond_stock(record: &TicketRecord, stock: Option<u64>) -> bool {
    record.state == TicketState::Waiting
        && record
            .position
            .zip(stock)
            .is_some_and(|(position, left)| position > left)
}

/// Unix milliseconds as RFC 3339 UTC, e.g. `2026-11-27T09:00:00.250Z`.
pub fn rfc3339_from_ms(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|at| {
            at.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_waiting_place_past_the_stock_left_is_beyond_it() {
        let at = |position| TicketRecord::waiting("t", position);
        assert!(!beyond_stock(&at(5), Some(5)));
        assert!(beyond_stock(&at(6), Some(5)));
        assert!(!beyond_stock(&at(6_000), None), "no stock: unlimited");
        let issued = TicketRecord {
            state: TicketState::TokenIssued,
            ..at(9)
        };
        assert!(!beyond_stock(&issued, Some(0)));
    }

    #[test]
    fn expiry_times_are_rfc3339_utc() {
        assert_eq!(rfc3339_from_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_from_ms(1_795_000_000_250),
            "2026-11-18T11:06:40.25Z"
        );
    }
}
