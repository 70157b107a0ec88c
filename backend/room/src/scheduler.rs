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
use vestibule_store::{now_ms, AdmitRequest, Store};

/// The quota arithmetic of one room, kept by its leader.
#[derive(Debug, Clone, Default)]
pub struct Quota {
    /// Fractional (and late-tick) admissions owed from earlier ticks.
    carry: f64,
}

impl Quota {
    /// How many to admit this tick at `rate_per_sec` after `elapsed`, for a nominal `tick`.
    ///
    /// Never more than ⌈rate × tick⌉ at once (one tick's quota: issue 15's admission windows).
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
    let holder = random_id();
    let tick = options.tick;
    let labels = [("room", room.name.clone())];
    let mut quota = Quota::default();
    let mut meter = PaceMeter::default();
    let mut leader: Option<Leadership> = None;
    let mut largest_tick = 0u64;
    let mut outage_logged = false;
    metrics::gauge!("vestibule_scheduler_leader", &labels).set(0.0);
    // Ticks on a grid (not a fixed delay after each tick's work): the elapsed time between two
    // ticks then averages exactly `tick`, and a late tick's debt is paid by the next, early one.
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut due = ticker.tick().await.into_std();
    let mut lateness = TickLateness::new(&labels);

    loop {
        let started = Instant::now();
        lateness.record(started.saturating_duration_since(due));
        let result = match leader.as_mut() {
            // The lease goes over the scheduler's own connection like the admissions: a
            // follower's tick must not wait behind request traffic either, or it would take
            // over late when the leader dies.
            None => match store.lease(room.id(), &holder).await {
                Ok(lease) => {
                    room.set_settings(lease.settings);
                    room.set_active_users(lease.active);
                    room.set_pace(lease.pace.unwrap_or_default());
                    if let Some(epoch) = lease.epoch {
                        tracing::info!(room = %room.name, epoch, "this process now leads the room's scheduler");
                        metrics::gauge!("vestibule_scheduler_leader", &labels).set(1.0);
                        room.counters.set_leader_epoch(Some(epoch));
                        leader = Some(Leadership::taken(epoch, started));
                        quota.reset();
                        meter.lost_track();
                    }
                    Ok(())
                }
                Err(vestibule_store::StoreError::RoomLost(_)) => {
                    // Redis restarted without persistence: written back as this runtime holds
                    // it (the first replica to write it wins).
                    write_back_document(&*store, &room).await
                }
                Err(error) => Err(error),
            },
            Some(leadership) => {
                let elapsed = leadership.owed_since_last_tick(started);
                let settings = room.settings();
                let now = now_ms();
                opening_step(&*store, &room, &holder, leadership.epoch, now).await;
                // Before the opening nobody is admitted (docs/DESIGN.md "Scheduled opening and
                // the draw"); the store also admits nobody while a pre-queue waits for its draw.
                let closed = opening_phase(&settings, now) != Phase::Open;
                let granted = if settings.paused || closed {
                    quota.reset();
                    0
                } else {
                    quota.take(settings.admission_rate_per_sec, elapsed, tick)
                };
                let tokens: Vec<String> = (0..granted).map(|_| entry_token(&room.name)).collect();
                let request = AdmitRequest {
                    holder: &holder,
                    epoch: leadership.epoch,
                    now_ms: now,
                    token_ttl_ms: settings.token_ttl_ms,
                    max_active_users: settings.max_active_users,
                    tokens: &tokens,
                    abandon_after_ms: effective_abandon_ms(&settings, &options.poll_tiers),
                    hold_place_ms: settings.hold_place_ms,
                    instant_bank_max: instant_bank_max(
                        settings.admission_rate_per_sec,
                        settings.paused || closed,
                        tick,
                    ),
                    pace: Some(meter.pace()),
                };
                match store.admit(room.id(), &request).await {
                    Ok(outcome) if outcome.fenced => {
                        tracing::warn!(room = %room.name, epoch = leadership.epoch, "admission refused by the fencing epoch: another process leads now, or the room was deleted");
                        metrics::counter!("vestibule_admissions_fenced_total", &labels)
                            .increment(1);
                        metrics::gauge!("vestibule_scheduler_leader", &labels).set(0.0);
                        room.counters.set_leader_epoch(None);
                        leader = None;
                        quota.reset();
                        Ok(())
                    }
                    Ok(outcome) => {
                        quota.settle_short(granted, outcome.admitted);
                        // Instant joins since the last tick: the store's count of shoppers ever
                        // admitted moved by more than this tick's pops.
                        let before = outcome.popped.saturating_sub(outcome.admitted);
                        let instant = leadership
                            .popped
                            .map_or(0, |last| before.saturating_sub(last));
                        leadership.popped = Some(outcome.popped);
                        let cap_limited = settings.max_active_users.is_some()
                            && !settings.paused
                            && outcome.admitted < granted
                            && outcome.waiting > 0;
                        meter.record(&TickSample {
                            elapsed_secs: elapsed.as_secs_f64(),
                            admitted: outcome.admitted + instant,
                            waiting: outcome.waiting,
                            active: outcome.active,
                            cap_limited,
                            paused: settings.paused,
                        });
                        let pace = meter.pace();
                        room.set_pace(pace);
                        if cap_limited {
                            metrics::counter!("vestibule_cap_limited_ticks_total", &labels)
                                .increment(1);
                        }
                        metrics::counter!("vestibule_instant_admissions_total", &labels)
                            .increment(instant);
                        room.set_active_users(outcome.active);
                        if let Some(config) = outcome.settings {
                            room.set_settings(config);
                        }
                        metrics::counter!("vestibule_admission_ticks_total", &labels).increment(1);
                        metrics::counter!("vestibule_admissions_total", &labels)
                            .increment(outcome.admitted);
                        room.counters
                            .ticked(outcome.admitted + instant, outcome.expired);
                        metrics::counter!("vestibule_tokens_expired_total", &labels)
                            .increment(outcome.expired);
                        metrics::counter!("vestibule_skipped_silent_total", &labels)
                            .increment(outcome.skipped);
                        if outcome.admitted > largest_tick {
                            largest_tick = outcome.admitted;
                            metrics::gauge!("vestibule_largest_tick_admissions", &labels)
                                .set(largest_tick as f64);
                        }
                        if outcome.admitted > 0 || outcome.skipped > 0 {
                            room.hub.wake();
                        }
                        Ok(())
                    }
                    Err(error) => {
                        // Unknown whether the lease survived: start over as a follower.
                        metrics::gauge!("vestibule_scheduler_leader", &labels).set(0.0);
                        room.counters.set_leader_epoch(None);
                        leader = None;
                        quota.reset();
                        Err(error)
                    }
                }
            }
        };
        match result {
            Ok(()) => outage_logged = false,
            Err(vestibule_store::StoreError::RoomGone(_)) if !outage_logged => {
                // Not an outage: this generation of the room was deleted (or the room created
                // again); the registry stops this runtime within a tick.
                tracing::info!(room = %room.name, generation = room.generation, "this generation of the room is gone: its scheduler waits to be stopped");
                outage_logged = true;
            }
            Err(error) if !outage_logged => {
                tracing::warn!(room = %room.name, %error, "scheduler cannot reach the store; retrying every tick");
                outage_logged = true;
            }
            Err(_) => {}
        }
        tokio::select! {
            next = ticker.tick() => due = next.into_std(),
            _ = shutdown.changed() => break,
            () = room.retired() => break,
        }
    }
    // A stopped scheduler leads nothing (a deleted room's gauge must not stay at 1).
    metrics::gauge!("vestibule_scheduler_leader", &labels).set(0.0);
    room.counters.set_leader_epoch(None);
    if leader.is_some() {
        // A deleted room has no lease left to give up (the embedded store says so).
        if let Err(error) = store
            .release_lease(room.id(), &holder)
            .await
            .or_else(|error| match error {
                vestibule_store::StoreError::RoomGone(_) => Ok(()),
                other => Err(other),
            })
        {
            tracing::warn!(room = %room.name, %error, "could not release the scheduler lease");
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

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(100);

    #[test]
    fn quota_carries_fractions_so_175_per_second_is_exact_over_a_second() {
        let mut quota = Quota::default();
        let per_tick: Vec<u64> = (0..10).map(|_| quota.take(175.0, TICK, TICK)).collect();
        assert_eq!(per_tick.iter().sum::<u64>(), 175);
        assert!(
            per_tick.iter().all(|n| *n == 17 || *n == 18),
            "{per_tick:?}"
        );
    }

    #[test]
    fn a_stalled_tick_admits_one_tick_and_the_rate_resumes_without_catching_up() {
        let mut quota = Quota::default();
        // A tick that ran 500 ms late may not admit 5 ticks' worth at once.
        let late = quota.take(100.0, Duration::from_millis(600), TICK);
        assert_eq!(late, 10);
        // Nor later: every tick after it admits exactly the rate's share.
        for _ in 0..60 {
            assert_eq!(quota.take(100.0, TICK, TICK), 10);
        }
    }

    #[test]
    fn grid_jitter_is_paid_by_the_next_tick_so_every_second_admits_the_rate() {
        let mut quota = Quota::default();
        // On a grid a tick 7 ms late is followed by one 7 ms early.
        let elapsed = [107, 93].map(Duration::from_millis);
        let per_tick: Vec<u64> = (0..40)
            .map(|i| quota.take(100.0, elapsed[i % 2], TICK))
            .collect();
        assert!(per_tick.iter().all(|n| *n <= 10), "{per_tick:?}");
        for second in per_tick.chunks(10) {
            let admitted: u64 = second.iter().sum();
            assert!((99..=100).contains(&admitted), "{per_tick:?}");
        }
        assert!(per_tick.iter().sum::<u64>() >= 399, "{per_tick:?}");
    }

    #[test]
    fn an_empty_queue_banks_no_capacity() {
        let mut quota = Quota::default();
        let granted = quota.take(175.0, TICK, TICK);
        quota.settle_short(granted, 0);
        assert!(quota.take(175.0, TICK, TICK) <= 18);
    }

    #[test]
    fn the_first_tick_after_taking_the_lease_is_owed_one_tick_so_the_rate_holds_from_the_start() {
        let taken_at = Instant::now();
        let mut leadership = Leadership::taken(7, taken_at);
        let mut quota = Quota::default();
        let first = leadership.owed_since_last_tick(taken_at + TICK);
        assert_eq!(first, TICK);
        // The first second as leader, with a backlog: exactly the rate, 17 or 18 a tick.
        let mut per_tick = vec![quota.take(175.0, first, TICK)];
        for n in 2..=10 {
            let elapsed = leadership.owed_since_last_tick(taken_at + TICK * n);
            per_tick.push(quota.take(175.0, elapsed, TICK));
        }
        assert_eq!(per_tick.iter().sum::<u64>(), 175, "{per_tick:?}");
    }

    #[test]
    fn a_slow_rate_admits_one_every_few_ticks() {
        let mut quota = Quota::default();
        let total: u64 = (0..100).map(|_| quota.take(2.5, TICK, TICK)).sum();
        assert_eq!(total, 25);
    }
}
