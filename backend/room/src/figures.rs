//! Every room's live figures for the admin event stream (`http::admin_events`), read once per
//! second per process by [`FigureReader`] whether or not anyone watches: two store calls per
//! room — `counts` (as the `/metrics` room gauges) and `share_figures`, which writes this
//! process's last second ([`crate::counters`] turned into rates, and while leading the admitted
//! and expired rates and the wait at the back) and reads every live replica's, so the figures
//! are the room's whichever replica answers ([`crate::figure_record`]).

use std::collections::HashMap;
use std::time::Instant;

use vestibule_shared::admin_events::{AdminEvent, RoomFigures, RoomLeader};
use vestibule_shared::auto_rate::AutoRateFigures;

use crate::counters::CounterTotals;
use crate::eta::{self, EtaInputs};
use crate::figure_record::{LeaderRecord, Merged, ReplicaRecord};
use crate::options::{replica_id, RoomOptions};
use crate::public_state::room_state;
use crate::{RoomRuntime, Rooms};
use vestibule_store::{now_ms, FigureShare, RoomCounts, Store};

/// How long a replica's shared record is kept: three missed seconds and it no longer counts.
const RECORD_TTL_MS: u64 = 3_000;

/// A rate to two decimals (what a person reads; the JSON stays short).
fn hundredths(rate: f64) -> f64 {
    (rate * 100.0).round() / 100.0
}

/// Reads the figures, remembering each room's totals between reads for the rates.
#[derive(Default)]
pub struct FigureReader {
    last: HashMap<String, (Instant, CounterTotals)>,
    /// Per room, the tokens expired this process had added to the store's total.
    expired_shared: HashMap<String, u64>,
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
                Ok(counts) => figures.push(self.room(store, options, room, counts, at_ms).await),
                Err(error) => {
                    tracing::debug!(room = %room.name, %error, "room left out of the admin event");
                }
            }
        }
        self.last
            .retain(|name, _| rooms.iter().any(|room| &room.name == name));
        self.expired_shared
            .retain(|name, _| rooms.iter().any(|room| &room.name == name));
        AdminEvent {
            at_ms,
            replica: replica_id().to_owned(),
            rooms: figures,
        }
    }

    async fn room(
        &mut self,
        store: &dyn Store,
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
        let inputs = EtaInputs::for_room(&settings, counts.active, pace, options.eta_margin);
        let back_of_line = (counts.waiting > 0)
            .then(|| eta::estimate(counts.waiting, &inputs, &options.poll_tiers));
        let own = ReplicaRecord {
            origin: room.origin.own_signals(at_ms),
            joins,
            polls,
            used,
            streams: room.hub.stream_count(),
            leader: room.counters.leader_epoch().map(|epoch| LeaderRecord {
                replica: replica_id().to_owned(),
                epoch,
                admitted,
                expired,
                eta_back: back_of_line
                    .and_then(|estimate| estimate.median_secs)
                    .map(eta::eta_display_secs),
                reason: back_of_line.and_then(|estimate| estimate.reason),
                auto_rate: room.auto_loop.record(),
            }),
        };
        let merged = self
            .share(store, room, &own, totals.tokens_expired, at_ms)
            .await;
        room.origin.set_room(at_ms, merged.origin);
        let leader = merged.leader.as_ref();
        // The leader's last second; before any leader shared, the pace it published.
        let admitted_per_sec = leader
            .map(|leader| leader.admitted)
            .or_else(|| pace.admitted_per_sec.map(hundredths));
        let eta_back_of_line_secs = leader.map_or_else(
            || {
                back_of_line
                    .and_then(|estimate| estimate.median_secs)
                    .map(eta::eta_display_secs)
            },
            |leader| leader.eta_back.filter(|_| counts.waiting > 0),
        );
        let reason = leader.map_or_else(
            || back_of_line.and_then(|estimate| estimate.reason),
            |leader| leader.reason.filter(|_| counts.waiting > 0),
        );
        RoomFigures {
            room: room.name.clone(),
            state: room_state(&settings, at_ms),
            waiting: counts.waiting,
            active_users: counts.active,
            stock_left: settings.sale.stock,
            sold: settings.sale.sold,
            admission_rate_per_sec: settings.admission_rate_per_sec,
            admitted_per_sec,
            joins_per_sec: hundredths(merged.joins),
            polls_per_sec: hundredths(merged.polls),
            sse_streams: merged.streams,
            tokens_used_per_sec: hundredths(merged.used),
            tokens_expired_per_sec: leader.map_or(0.0, |leader| leader.expired),
            eta_back_of_line_secs,
            reason,
            paused: settings.paused,
            closed: settings.sale.closed,
            origin: merged.origin,
            auto_rate: settings.auto_rate.clone().map(|setting| {
                let shared = leader
                    .and_then(|leader| leader.auto_rate)
                    .unwrap_or_default();
                AutoRateFigures {
                    setting,
                    reason: shared.reason,
                    last_change: shared.last_change,
                }
            }),
            leader: merged.leader.map(|leader| RoomLeader {
                replica: leader.replica,
                epoch: leader.epoch,
            }),
        }
    }

    /// Shares `own` and reads every live replica's records; on a store error, this process's
    /// own record alone (logged at `debug`).
    async fn share(
        &mut self,
        store: &dyn Store,
        room: &RoomRuntime,
        own: &ReplicaRecord,
        expired_total: u64,
        at_ms: u64,
    ) -> Merged {
        let record = serde_json::to_string(own).unwrap_or_default();
        let shared = self
            .expired_shared
            .entry(room.name.clone())
            .or_insert(expired_total);
        let share = FigureShare {
            replica: replica_id(),
            record: Some(&record),
            expired: expired_total.saturating_sub(*shared),
            now_ms: at_ms,
            ttl_ms: RECORD_TTL_MS,
        };
        match store.share_figures(room.id(), &share).await {
            Ok(read) => {
                *shared = expired_total;
                Merged::of(&read.records)
            }
            Err(error) => {
                tracing::debug!(room = %room.name, %error, "figures not shared");
                Merged::of(&[record])
            }
        }
    }
}
