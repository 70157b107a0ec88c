//! Every room's live figures for the admin event stream (`http::admin_events`), read once per
//! second per process by [`FigureReader`] however many operators watch: one `counts` store call
//! per room (as the `/metrics` room gauges), and this process's running totals
//! ([`crate::counters`]) turned into per-second rates.

use std::collections::HashMap;
use std::time::Instant;

use vestibule_shared::admin_events::{AdminEvent, RoomFigures, RoomLeader};

use crate::counters::CounterTotals;
use crate::eta::{self, EtaInputs};
use crate::options::{replica_id, RoomOptions};
use crate::public_state::room_state;
use crate::{RoomRuntime, Rooms};
use vestibule_store::{now_ms, RoomCounts, Store};

/// A rate to two decimals (what a person reads; the JSON stays short).
fn hundredths(rate: f64) -> f64 {
    (rate * 100.0).round() / 100.0
}

/// Reads the figures, remembering each room's totals between reads for the rates.
#[derive(Default)]
pub struct FigureReader {
    last: HashMap<String, (Instant, CounterTotals)>,
}

impl FigureReader {
    /// Every running room's figures now. A room whose counts the store cannot give is left out
    /// (and logged at `debug`: the console shows the gap).
    pub async fn read(
        &mut self,
        rooms: &Rooms,
        store: &dyn Store,
        options: &RoomOptions,
    ) -> AdminEvent {
        let at_ms = now_ms();
        let rooms = rooms.list();
        let mut figures = Vec::with_capacity(rooms.len());
        for room in &rooms {
            match store.counts(room.id(), at_ms).await {
                Ok(counts) => figures.push(self.room(options, room, counts, at_ms)),
                Err(error) => {
                    tracing::debug!(room = %room.name, %error, "room left out of the admin event");
                }
            }
        }
        self.last
            .retain(|name, _| rooms.iter().any(|room| &room.name == name));
        AdminEvent {
            at_ms,
            replica: replica_id().to_owned(),
            rooms: figures,
        }
    }

    fn room(
        &mut self,
        options: &RoomOptions,
        room: &RoomRuntime,
        counts: RoomCounts,
        at_ms: u64,
    ) -> RoomFigures {
        let now = Instant::now();
        let totals = room.counters.totals();
        let (then, earlier) = self
            .last
            .insert(room.name.clone(), (now, totals))
            .unwrap_or((now, totals));
        let secs = now.duration_since(then).as_secs_f64();
        let [joins, polls, admitted, used, expired] =
            totals.rates_since(&earlier, secs).map(hundredths);
        let settings = room.settings();
        let pace = room.pace();
        let leader = room.counters.leader_epoch().map(|epoch| RoomLeader {
            replica: replica_id().to_owned(),
            epoch,
        });
        // Counted here over the last second when this process admits; else what the leader
        // published (or nothing yet).
        let admitted_per_sec = if leader.is_some() && secs > 0.0 {
            Some(admitted)
        } else {
            pace.admitted_per_sec.map(hundredths)
        };
        let inputs = EtaInputs::for_room(&settings, counts.active, pace, options.eta_margin);
        let back_of_line = (counts.waiting > 0)
            .then(|| eta::estimate(counts.waiting, &inputs, &options.poll_tiers));
        let eta_back_of_line_secs = back_of_line
            .and_then(|estimate| estimate.median_secs)
            .map(eta::eta_display_secs);
        RoomFigures {
            room: room.name.clone(),
            state: room_state(&settings, at_ms),
            waiting: counts.waiting,
            active_users: counts.active,
            stock_left: settings.sale.stock,
            sold: settings.sale.sold,
            admission_rate_per_sec: settings.admission_rate_per_sec,
            admitted_per_sec,
            joins_per_sec: joins,
            polls_per_sec: polls,
            sse_streams: room.hub.stream_count(),
            tokens_used_per_sec: used,
            tokens_expired_per_sec: expired,
            eta_back_of_line_secs,
            reason: back_of_line.and_then(|estimate| estimate.reason),
            paused: settings.paused,
            closed: settings.sale.closed,
            leader,
        }
    }
}
