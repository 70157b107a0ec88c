//! The admission scheduler: one loop per room per process, one leader per room across replicas.
//!
//! Each tick (on a fixed grid of `--tick-ms`; a tick that overruns makes the loop skip the grid
//! points it missed, never run them back to back) the loop takes or renews the room's lease, which
//! also refreshes the room's settings in this process. The leader then computes its quota — rate ×
//! elapsed + fractional carry, capped at ⌈rate × tick⌉ — and
//! asks the store to admit that many in one fenced atomic step (docs/DESIGN.md "Admission",
//! leadership).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::opening::{self, opening_phase, Phase, StepDone};
use crate::options::RoomOptions;
use crate::pace::{PaceMeter, TickSample};
use crate::presence::effective_abandon_ms;
use crate::RoomRuntime;
use vestibule_store::ids::{entry_token, random_id};
use vestibule_store::{now_ms, AdmitOutcome, AdmitRequest, Settings, Store, StoreError};

/// The quota arithmetic of one room, kept by its leader.
#[derive(Debug, Clone, Default)]
pub struct Quota {
    /// Fractional (and late-tick) admissions owed from earlier ticks.
    carry: f64,
}

impl Quota {
    /// How many to admit this tick at `rate_per_sec` after `elapsed`, for a nominal `tick`.
    ///
    /// Never more than ⌈rate × tick⌉ at once (one tick's quota).
    /// Ticks run on a grid, so a tick a few milliseconds late is followed by one as much early:
    /// what the late one could not admit is carried (at most a quarter tick's worth, or one
    /// shopper) and paid by the early one, and every second admits the rate. A longer stall (a
    /// slow store, a paused process) is not caught up: catching up would admit above the rate
    /// for seconds after.
    pub fn take(&mut self, rate_per_sec: f64, elapsed: Duration, tick: Duration) -> u64 {
        if rate_per_sec <= 0.0 {
            self.carry = 0.0;
            return 0;
        }
        let per_tick = rate_per_sec * tick.as_secs_f64();
        let ceiling = per_tick.ceil().max(1.0);
        let budget = self.carry + rate_per_sec * elapsed.as_secs_f64();
        let granted = budget.floor().min(ceiling);
        self.carry = (budget - granted).min((per_tick / 4.0).max(1.0));
        granted as u64
    }

    /// Forgets what is owed: the queue ran dry or a cap held admission back, and capacity unused
    /// then must not turn into a burst later.
    pub fn settle_short(&mut self, granted: u64, admitted: u64) {
        if admitted < granted {
            self.carry = 0.0;
        }
    }

    /// Forgets everything (lost the lease, paused).
    pub fn reset(&mut self) {
        self.carry = 0.0;
    }
}

/// Runs a room's scheduler on `store` until shutdown (or the room is deleted); gives up the
/// lease on the way out.
///
/// A follower calls the lease script each tick (which also refreshes this process's copy of the
/// room's settings). The leader calls only the admission script, which renews the lease, checks
/// the fencing epoch and returns the settings for the next tick: one store round trip per tick.
/// A leader that was paused past its lease therefore meets the fence on its very first call.
pub async fn run(
    store: Arc<dyn Store>,
    options: Arc<RoomOptions>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    room: Arc<RoomRuntime>,
) {
    let mut scheduler = Scheduler::new(store, options, room);
    // Ticks on a grid (not a fixed delay after each tick's work): the elapsed time between two
    // ticks then averages exactly `tick`, and a late tick's debt is paid by the next, early one.
    let mut ticker = tokio::time::interval(scheduler.options.tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut due = ticker.tick().await.into_std();
    let mut lateness = TickLateness::new(&scheduler.labels);
    loop {
        let started = Instant::now();
        lateness.record(started.saturating_duration_since(due));
        let result = scheduler.tick(started).await;
        scheduler.report(result);
        tokio::select! {
            next = ticker.tick() => due = next.into_std(),
            _ = shutdown.changed() => break,
            () = scheduler.room.retired() => break,
        }
    }
    scheduler.stop().await;
}

/// One room's scheduler in this process: who it is, and what it carries from tick to tick.
struct Scheduler {
    store: Arc<dyn Store>,
    options: Arc<RoomOptions>,
    room: Arc<RoomRuntime>,
    /// This process's name as a lease holder (random).
    holder: String,
    labels: [(&'static str, String); 1],
    quota: Quota,
    meter: PaceMeter,
    /// `Some` while this process leads the room.
    leader: Option<Leadership>,
    /// The closed loop, run while leading.
    auto: auto_loop::AutoLoop,
    /// The most admitted by one tick so far (a gauge).
    largest_tick: u64,
    /// An outage is logged once, until a tick succeeds again.
    outage_logged: bool,
}

impl Scheduler {
    fn new(store: Arc<dyn Store>, options: Arc<RoomOptions>, room: Arc<RoomRuntime>) -> Self {
        let labels = [("room", room.name.clone())];
        metrics::gauge!("vestibule_scheduler_leader", &labels).set(0.0);
        Self {
            store,
            options,
            room,
            holder: random_id(),
            labels,
            quota: Quota::default(),
            meter: PaceMeter::default(),
            leader: None,
            auto: auto_loop::AutoLoop::default(),
            largest_tick: 0,
            outage_logged: false,
        }
    }

    /// One tick: a follower's lease call, or the leader's admission.
    async fn tick(&mut self, started: Instant) -> Result<(), StoreError> {
        if self.leader.is_some() {
            self.lead(started).await
        } else {
            self.follow(started).await
        }
    }

    /// A follower's tick: takes the lease if it is free, and refreshes the room's settings.
    async fn follow(&mut self, started: Instant) -> Result<(), StoreError> {
        // The lease goes over the scheduler's own connection like the admissions: a follower's
        // tick must not wait behind request traffic either, or it would take over late when
        // the leader dies.
        let lease = match self.store.lease(self.room.id(), &self.holder).await {
            Ok(lease) => lease,
            // Redis restarted without persistence: written back as this runtime holds it (the
            // first replica to write it wins).
            Err(StoreError::RoomLost(_)) => {
                return write_back_document(&*self.store, &self.room).await
            }
            Err(error) => return Err(error),
        };
        let room = &self.room;
        room.set_settings(lease.settings);
        room.set_active_users(lease.active);
        room.set_pace(lease.pace.unwrap_or_default());
        if let Some(epoch) = lease.epoch {
            tracing::info!(room = %room.name, epoch, "this process now leads the room's scheduler");
            metrics::gauge!("vestibule_scheduler_leader", &self.labels).set(1.0);
            room.counters.set_leader_epoch(Some(epoch));
            self.leader = Some(Leadership::taken(epoch, started));
            self.quota.reset();
            self.meter.lost_track();
        }
        Ok(())
    }

    /// The leader's tick: the opening's work, then one fenced admission of this tick's quota.
    async fn lead(&mut self, started: Instant) -> Result<(), StoreError> {
        let Some(leadership) = self.leader.as_mut() else {
            return Ok(());
        };
        let (epoch, elapsed) = (leadership.epoch, leadership.owed_since_last_tick(started));
        let now = now_ms();
        self.auto.step(&*self.store, &self.room, now).await;
        let settings = self.room.settings();
        opening_step(&*self.store, &self.room, &self.holder, epoch, now).await;
        // Before the opening nobody is admitted (docs/DESIGN.md "Scheduled opening and the
        // draw"); the store also admits nobody while a pre-queue waits for its draw.
        let closed = opening_phase(&settings, now) != Phase::Open;
        let tick = self.options.tick;
        let granted = if settings.paused || closed {
            self.quota.reset();
            0
        } else {
            self.quota
                .take(settings.admission_rate_per_sec, elapsed, tick)
        };
        let tokens: Vec<String> = (0..granted).map(|_| entry_token(&self.room.name)).collect();
        let request = AdmitRequest {
            holder: &self.holder,
            epoch,
            now_ms: now,
            token_ttl_ms: settings.token_ttl_ms,
            max_active_users: settings.max_active_users,
            tokens: &tokens,
            abandon_after_ms: effective_abandon_ms(&settings, &self.options.poll_tiers),
            hold_place_ms: settings.hold_place_ms,
            instant_bank_max: instant_bank_max(
                settings.admission_rate_per_sec,
                settings.paused || closed,
                tick,
            ),
            pace: Some(self.meter.pace()),
        };
        match self.store.admit(self.room.id(), &request).await {
            Ok(outcome) if outcome.fenced => {
                tracing::warn!(room = %self.room.name, epoch, "admission refused by the fencing epoch: another process leads now, or the room was deleted");
                metrics::counter!("vestibule_admissions_fenced_total", &self.labels).increment(1);
                self.step_down();
                Ok(())
            }
            Ok(outcome) => {
                self.admitted(&outcome, granted, elapsed, &settings);
                Ok(())
            }
            Err(error) => {
                // Unknown whether the lease survived: start over as a follower.
                self.step_down();
                Err(error)
            }
        }
    }

    /// What a tick's admission did: the quota settled, the pace measured, the room's copy of
    /// the settings and counts refreshed, the metrics counted, the ticket watch woken.
    fn admitted(
        &mut self,
        outcome: &AdmitOutcome,
        granted: u64,
        elapsed: Duration,
        settings: &Settings,
    ) {
        self.quota.settle_short(granted, outcome.admitted);
        // Instant joins since the last tick: the store's count of shoppers ever admitted moved
        // by more than this tick's pops.
        let before = outcome.popped.saturating_sub(outcome.admitted);
        let instant = match self.leader.as_mut() {
            Some(leadership) => {
                let instant = leadership
                    .popped
                    .map_or(0, |last| before.saturating_sub(last));
                leadership.popped = Some(outcome.popped);
                instant
            }
            None => 0,
        };
        let cap_limited = settings.max_active_users.is_some()
            && !settings.paused
            && outcome.admitted < granted
            && outcome.waiting > 0;
        self.meter.record(&TickSample {
            elapsed_secs: elapsed.as_secs_f64(),
            admitted: outcome.admitted + instant,
            waiting: outcome.waiting,
            active: outcome.active,
            cap_limited,
            paused: settings.paused,
        });
        let room = &self.room;
        room.set_pace(self.meter.pace());
        room.set_active_users(outcome.active);
        if let Some(config) = outcome.settings.clone() {
            room.set_settings(config);
        }
        room.counters
            .ticked(outcome.admitted + instant, outcome.expired);
        let labels = &self.labels;
        if cap_limited {
            metrics::counter!("vestibule_cap_limited_ticks_total", labels).increment(1);
        }
        metrics::counter!("vestibule_instant_admissions_total", labels).increment(instant);
        metrics::counter!("vestibule_admission_ticks_total", labels).increment(1);
        metrics::counter!("vestibule_admissions_total", labels).increment(outcome.admitted);
        metrics::counter!("vestibule_tokens_expired_total", labels).increment(outcome.expired);
        metrics::counter!("vestibule_skipped_silent_total", labels).increment(outcome.skipped);
        if outcome.admitted > self.largest_tick {
            self.largest_tick = outcome.admitted;
            metrics::gauge!("vestibule_largest_tick_admissions", labels)
                .set(self.largest_tick as f64);
        }
        if outcome.admitted > 0 || outcome.skipped > 0 {
            room.hub.wake();
        }
    }

    /// Leads no more (fenced, or unsure whether the lease survived): follows from the next tick.
    fn step_down(&mut self) {
        metrics::gauge!("vestibule_scheduler_leader", &self.labels).set(0.0);
        self.room.counters.set_leader_epoch(None);
        self.leader = None;
        self.auto.reset(&self.room);
        self.quota.reset();
    }

    /// Logs a failed tick once per outage.
    fn report(&mut self, result: Result<(), StoreError>) {
        let room = &self.room;
        match result {
            Ok(()) => self.outage_logged = false,
            Err(StoreError::RoomGone(_)) if !self.outage_logged => {
                // Not an outage: this generation of the room was deleted (or the room created
                // again); the registry stops this runtime within a tick.
                tracing::info!(room = %room.name, generation = room.generation, "this generation of the room is gone: its scheduler waits to be stopped");
                self.outage_logged = true;
            }
            Err(error) if !self.outage_logged => {
                tracing::warn!(room = %room.name, %error, "scheduler cannot reach the store; retrying every tick");
                self.outage_logged = true;
            }
            Err(_) => {}
        }
    }

    /// On the way out: leads nothing any more, and gives the lease up if it held it.
    async fn stop(mut self) {
        // A stopped scheduler leads nothing (a deleted room's gauge must not stay at 1).
        let led = self.leader.is_some();
        self.step_down();
        if !led {
            return;
        }
        // A deleted room has no lease left to give up (the embedded store says so).
        match self.store.release_lease(self.room.id(), &self.holder).await {
            Ok(()) | Err(StoreError::RoomGone(_)) => {}
            Err(error) => {
                tracing::warn!(room = %self.room.name, %error, "could not release the scheduler lease");
            }
        }
    }
}

/// The leader's opening work for this tick ([`opening::leader_step`]), logged and measured; a
/// store error is only logged (the admission below meets it too, and the next tick retries).
async fn opening_step(store: &dyn Store, room: &RoomRuntime, holder: &str, epoch: u64, now: u64) {
    let labels = [("room", room.name.clone())];
    match opening::leader_step(store, room, holder, epoch, now).await {
        Ok(StepDone::Drew {
            count,
            millis,
            longest_step_ms,
        }) => {
            tracing::info!(
                room = %room.name,
                count,
                millis,
                longest_step_ms,
                "the draw of the pre-queue is made"
            );
            metrics::gauge!("vestibule_draw_duration_ms", &labels).set(millis as f64);
            metrics::gauge!("vestibule_draw_longest_step_ms", &labels).set(longest_step_ms as f64);
            metrics::gauge!("vestibule_draw_tickets", &labels).set(count as f64);
            room.hub.wake();
        }
        Ok(StepDone::Retry(outcome)) => {
            tracing::info!(room = %room.name, ?outcome, "the draw was not made by this tick");
        }
        Ok(StepDone::Nothing) => {}
        Err(error) => {
            tracing::warn!(room = %room.name, %error, "the opening step could not reach the store");
        }
    }
}

/// How late ticks start after their point on the grid: the admission windows' enemy (a tick
/// owed more than one tick's quota cannot pay it at once: BENCHMARKS.md "Admission windows").
/// Counts ticks [`LATE_TICK`] or more behind (`vestibule_late_ticks_total`) and keeps the
/// largest lateness seen (`vestibule_largest_tick_lateness_ms`).
struct TickLateness {
    late: metrics::Counter,
    largest_gauge: metrics::Gauge,
    largest: Duration,
}

/// A tick this much behind its grid point counts as late: at 175 /s, 5 ms is 0.9 shoppers, about
/// what a 1-s window may be off (±1%, 1.75 shoppers) with the quota's rounding besides.
const LATE_TICK: Duration = Duration::from_millis(5);

impl TickLateness {
    fn new(labels: &[(&'static str, String); 1]) -> Self {
        Self {
            late: metrics::counter!("vestibule_late_ticks_total", labels),
            largest_gauge: metrics::gauge!("vestibule_largest_tick_lateness_ms", labels),
            largest: Duration::ZERO,
        }
    }

    fn record(&mut self, behind: Duration) {
        if behind >= LATE_TICK {
            self.late.increment(1);
        }
        if behind > self.largest {
            self.largest = behind;
            self.largest_gauge.set(behind.as_secs_f64() * 1000.0);
        }
    }
}

/// What the leader keeps between ticks.
struct Leadership {
    /// Fencing epoch of the lease.
    epoch: u64,
    /// When the last admission tick started (or the lease was taken).
    last_tick: Instant,
    /// Shoppers ever admitted in the room after the last tick (`None` before the first).
    popped: Option<u64>,
}

impl Leadership {
    /// The lease with fencing `epoch`, taken by the tick that started `at`.
    fn taken(epoch: u64, at: Instant) -> Self {
        Self {
            epoch,
            // The first admission comes at the next tick and is owed the time since this one:
            // one tick's worth, not the time since the last leader's tick (unknown here).
            // (Counted from a tick before this one, it was owed two: its surplus, carried, made
            // the first second after every change of leader admit 2.4% over the rate in the
            // flash-sale benchmark.)
            last_tick: at,
            popped: None,
        }
    }

    /// The time a tick that started at `now` is owed admissions for: since the last admission
    /// tick (or since the lease was taken).
    fn owed_since_last_tick(&mut self, now: Instant) -> Duration {
        let owed = now.saturating_duration_since(self.last_tick);
        self.last_tick = now;
        owed
    }
}

/// Most instant admissions a tick may bank for joins that find nobody waiting: one tick's quota
/// (at least 1, so that a slow rate still admits an idle room's next shopper at once), none
/// while paused. With nobody waiting the bank and the ticks' pops together never exceed what
/// the quota granted, so the rate holds (docs/DESIGN.md "No wait when there is no line").
pub fn instant_bank_max(rate_per_sec: f64, paused: bool, tick: Duration) -> u64 {
    if paused || rate_per_sec <= 0.0 {
        return 0;
    }
    ((rate_per_sec * tick.as_secs_f64()).ceil() as u64).max(1)
}

/// Writes back the room's document the store lost (Redis restarted without persistence) as
/// `room`'s runtime holds it, only while it is still missing (`Catalog::write_back_room`: the
/// first replica's copy wins), and takes the document in force.
async fn write_back_document(
    store: &dyn Store,
    room: &RoomRuntime,
) -> Result<(), vestibule_store::StoreError> {
    let in_force = store
        .write_back_room(&room.name, &room.versioned_settings())
        .await?;
    room.take_restored(in_force);
    Ok(())
}

pub mod auto_loop;

#[cfg(test)]
mod tests;
