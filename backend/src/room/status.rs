//! A ticket's public status (`TicketStatus`): what join, poll and the SSE stream answer.
//!
//! A projection of the store's record, the room's settings and the configured ETA margin and
//! poll tiers; no I/O. The entry token is the store's token wrapped in a signed JWT
//! (`crate::tokens`), the same string on every call.

use vestibule_shared::{RoomState, TicketState, TicketStatus};

use crate::config::Config;
use crate::room::eta;
use crate::room::RoomRuntime;
use crate::store::{now_ms, TicketRecord};

/// The public status of a ticket: position, ETA and poll hint by the formulas of
/// docs/DESIGN.md ("ETA and poll hints"), from the room's settings as this process last read them.
pub fn ticket_status(config: &Config, room: &RoomRuntime, record: &TicketRecord) -> TicketStatus {
    let settings = room.settings();
    let room_state = if settings.paused {
        RoomState::Paused
    } else {
        RoomState::Open
    };
    let (eta_seconds, next_poll_after_ms) = match (record.state, record.position) {
        (TicketState::Waiting, Some(position)) => {
            let exact = eta::eta_with_cap(
                position,
                settings.admission_rate_per_sec,
                config.eta_margin,
                settings.paused,
                settings
                    .max_active_users
                    .map(|cap| (cap, room.active_users())),
                settings.token_ttl_ms as f64 / 1000.0,
            );
            (
                exact.map(eta::eta_display_secs),
                eta::next_poll_after_ms(position, exact, &config.poll_tiers),
            )
        }
        _ => (None, config.poll_tiers.after_ms(u64::MAX)),
    };
    let issued = record.state == TicketState::TokenIssued;
    TicketStatus {
        ticket_id: record.id.clone(),
        room: room.name.clone(),
        status: record.state,
        position: record
            .position
            .filter(|_| record.state == TicketState::Waiting),
        eta_seconds,
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
        // dropped since (its domain may change hands) no longer receives shoppers.
        checkout_url: issued.then(|| {
            let stored = settings.checkout_url.as_deref().filter(|url| {
                vestibule_shared::settings::check_checkout_url(url, &config.cors_origins).is_ok()
            });
            stored.map(str::to_owned).unwrap_or_else(|| {
                format!("{}checkout?room={}", config.gate.page_base(), room.name)
            })
        }),
        room_state,
    }
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
    fn expiry_times_are_rfc3339_utc() {
        assert_eq!(rfc3339_from_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_from_ms(1_795_000_000_250),
            "2026-11-18T11:06:40.25Z"
        );
    }
}
