//! The leader's measurement of what admission actually achieves (docs/DESIGN.md "ETA and poll
//! hints"), from what each tick admitted and how many active shoppers finished between ticks:
//! the admission rate weighted over about the last minute (so a lowered rate is still seen as
//! lowered), the finish rate over about the last 15 s (so the ETA follows a checkout that slows
//! or speeds up within seconds).
//!
//! Both rates are ratios of two exponentially decayed sums (events ÷ exposure), so they mean
//! "events per unit of exposure over the last minute or so" from the first tick on, without the
//! bias towards zero of an EWMA started at zero.

use vestibule_store::Pace;

/// Time constant of the admission rate's exponential window, seconds.
pub const WINDOW_SECS: f64 = 60.0;

/// Time constant of the finish rate's window, seconds. The exposure counts every token in
/// flight, finished or not, so tokens held longer than before lower the rate as they age,
/// before any of them finishes.
pub const FINISH_WINDOW_SECS: f64 = 15.0;

/// Time constant of the recent finish rate (the high estimate's), seconds.
pub const RECENT_FINISH_WINDOW_SECS: f64 = 5.0;

/// Finishes the 15-s rate must predict over the recent window's exposure before the recent
/// rate is published: none in a stretch that should have seen two says checkout slowed.
const RECENT_EXPECTED_FINISHES: f64 = 2.0;

/// Exposure needed before a rate is published: one second of admission, or one active shopper
/// for one second.
const MIN_EXPOSURE: f64 = 1.0;

/// Admissions (decayed) needed before the admission rate is published: ticks admit whole
/// shoppers, so fewer would make a slow room's rate look slower than it is (20 → within 5%).
const MIN_ADMISSIONS: f64 = 20.0;

/// Finishes (decayed) needed before the finish rate is published; until then the ETA assumes
/// the worst case (tokens held to their TTL).
const MIN_FINISHES: f64 = 5.0;

/// Events over exposure, both decayed with the same time constant.
#[derive(Debug, Clone, Copy, Default)]
struct DecayedRatio {
    events: f64,
    exposure: f64,
}

impl DecayedRatio {
    fn decay(&mut self, factor: f64) {
        self.events *= factor;
        self.exposure *= factor;
    }

    fn add(&mut self, events: f64, exposure: f64) {
        self.events += events;
        self.exposure += exposure;
    }

    /// The ratio once `min_events` whole events are in the window (half an event of slack for
    /// the decay of the ones counted).
    fn value(&self, min_events: f64) -> Option<f64> {
        (self.exposure >= MIN_EXPOSURE && self.events + 0.5 >= min_events)
            .then(|| self.events / self.exposure)
    }
}

/// What one leader tick saw, for [`PaceMeter::record`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TickSample {
    /// Seconds since the previous tick.
    pub elapsed_secs: f64,
    /// Shoppers admitted since the previous tick: this tick's pops plus instant joins.
    pub admitted: u64,
    /// Shoppers still waiting after the tick.
    pub waiting: u64,
    /// Active users after the tick.
    pub active: u64,
    /// The cap held the tick back (it admitted fewer than its quota with shoppers waiting).
    pub cap_limited: bool,
    /// The room was paused (nothing could be admitted).
    pub paused: bool,
}

/// The leader's running measurement of one room.
#[derive(Debug, Clone, Default)]
pub struct PaceMeter {
    admission: DecayedRatio,
    finishes: DecayedRatio,
    recent_finishes: DecayedRatio,
    /// Active users after the previous tick (`None` before the first).
    last_active: Option<u64>,
    cap_limited: bool,
}

impl PaceMeter {
    /// Adds one tick.
    ///
    /// - Admission rate: counted only on ticks that could show what admission achieves — open,
    ///   shoppers left waiting, not held back by the cap (an empty line or a cap says nothing
    ///   about the scheduler's rate).
    /// - Finishes: the active users before the tick plus those admitted, minus those after, per
    ///   active shopper and second (exposure = active users × elapsed).
    pub fn record(&mut self, tick: &TickSample) {
        let elapsed = tick.elapsed_secs.max(0.0);
        self.admission.decay((-elapsed / WINDOW_SECS).exp());
        self.finishes.decay((-elapsed / FINISH_WINDOW_SECS).exp());
        self.recent_finishes
            .decay((-elapsed / RECENT_FINISH_WINDOW_SECS).exp());
        if !tick.paused && !tick.cap_limited && tick.waiting > 0 {
            self.admission.add(tick.admitted as f64, elapsed);
        }
        if let Some(before) = self.last_active {
            let finished = (before + tick.admitted).saturating_sub(tick.active);
            self.finishes.add(finished as f64, before as f64 * elapsed);
            self.recent_finishes
                .add(finished as f64, before as f64 * elapsed);
        }
        self.last_active = Some(tick.active);
        self.cap_limited = tick.cap_limited;
    }

    /// Forgets the active-users baseline (after losing the lease: another leader's ticks ran).
    pub fn lost_track(&mut self) {
        self.last_active = None;
    }

    /// The measured pace to publish.
    pub fn pace(&self) -> Pace {
        let finish_per_active_sec = self.finishes.value(MIN_FINISHES);
        let recent = self.recent_finishes;
        Pace {
            admitted_per_sec: self.admission.value(MIN_ADMISSIONS),
            finish_per_active_sec,
            recent_finish_per_active_sec: finish_per_active_sec
                .filter(|rate| recent.exposure * rate >= RECENT_EXPECTED_FINISHES)
                .map(|_| recent.events / recent.exposure),
            cap_limited: self.cap_limited,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(admitted: u64, waiting: u64, active: u64) -> TickSample {
        TickSample {
            elapsed_secs: 0.1,
            admitted,
            waiting,
            active,
            ..TickSample::default()
        }
    }

    #[test]
    fn the_admission_rate_is_what_ticks_admitted_while_shoppers_waited() {
        let mut meter = PaceMeter::default();
        assert_eq!(meter.pace().admitted_per_sec, None, "nothing measured yet");
        for _ in 0..20 {
            meter.record(&tick(2, 100, 0));
        }
        let rate = meter.pace().admitted_per_sec.unwrap();
        assert!((rate - 20.0).abs() < 1e-9, "{rate}");
        // An empty line says nothing about the rate: it stays as measured.
        for _ in 0..50 {
            meter.record(&tick(0, 0, 0));
        }
        let rate = meter.pace().admitted_per_sec.unwrap();
        assert!((rate - 20.0).abs() < 1e-9, "{rate}");
    }

    #[test]
    fn a_halved_rate_shows_within_the_window_and_older_ticks_fade() {
        let mut meter = PaceMeter::default();
        for _ in 0..600 {
            meter.record(&tick(2, 100, 0));
        }
        for _ in 0..100 {
            meter.record(&tick(1, 100, 0));
        }
        let after_10s = meter.pace().admitted_per_sec.unwrap();
        assert!(after_10s > 12.0 && after_10s < 18.0, "{after_10s}");
        for _ in 0..1800 {
            meter.record(&tick(1, 100, 0));
        }
        let after_3min = meter.pace().admitted_per_sec.unwrap();
        assert!((after_3min - 10.0).abs() < 0.5, "{after_3min}");
    }

    #[test]
    fn finishes_are_counted_per_active_shopper_and_second() {
        let mut meter = PaceMeter::default();
        meter.record(&tick(5, 50, 5));
        // Each tick: 1 of the 5 active finishes and 1 is admitted in its place (cap 5).
        for _ in 0..100 {
            meter.record(&TickSample {
                cap_limited: true,
                ..tick(1, 50, 5)
            });
        }
        let pace = meter.pace();
        let hazard = pace.finish_per_active_sec.unwrap();
        // 10 finishes/s among 5 active: 2 per active shopper per second.
        assert!((hazard - 2.0).abs() < 1e-9, "{hazard}");
        assert!(pace.cap_limited);
        // Cap-limited ticks do not count towards the admission rate.
        assert_eq!(pace.admitted_per_sec, None);
    }

    #[test]
    fn a_checkout_that_slows_lowers_the_recent_rate_within_seconds() {
        let mut meter = PaceMeter::default();
        meter.record(&tick(20, 100, 20));
        // Steady: 20 active, one finishes every 0.2 s (a 4-s hold) and is replaced.
        for n in 0..600 {
            meter.record(&TickSample {
                cap_limited: true,
                ..tick(u64::from(n % 2 == 0), 100, 20)
            });
        }
        let steady = meter.pace();
        let rate = steady.finish_per_active_sec.unwrap();
        assert!((rate - 0.25).abs() < 0.01, "{rate}");
        let recent = steady.recent_finish_per_active_sec.unwrap();
        assert!((recent - 0.25).abs() < 0.03, "{recent}");
        // Checkout slows: nobody finishes for 4 s.
        for _ in 0..40 {
            meter.record(&TickSample {
                cap_limited: true,
                ..tick(0, 100, 20)
            });
        }
        let slowed = meter.pace();
        let rate = slowed.finish_per_active_sec.unwrap();
        let recent = slowed.recent_finish_per_active_sec.unwrap();
        assert!(
            recent < 0.12 && recent < rate * 0.6,
            "recent {recent}, 15-s {rate}"
        );
    }

    #[test]
    fn a_slow_room_publishes_no_rate_until_enough_shoppers_were_admitted() {
        let mut meter = PaceMeter::default();
        // 0.5/s for 20 s: 10 admissions, too few to tell the rate within 5%.
        for n in 0..200 {
            meter.record(&tick(u64::from(n % 20 == 0), 100, 0));
        }
        assert_eq!(meter.pace().admitted_per_sec, None);
    }

    #[test]
    fn the_pace_survives_the_store_text_form() {
        let pace = Pace {
            admitted_per_sec: Some(17.5),
            finish_per_active_sec: None,
            recent_finish_per_active_sec: Some(0.25),
            cap_limited: true,
        };
        assert_eq!(Pace::decode(&pace.encode()), Some(pace));
        // The form of a leader that knows no recent rate.
        assert_eq!(
            Pace::decode("17.5 - 1"),
            Some(Pace {
                recent_finish_per_active_sec: None,
                ..pace
            })
        );
        assert_eq!(Pace::decode(""), None);
        assert_eq!(Pace::decode("1 2"), None);
        assert_eq!(Pace::decode("x - 0"), None);
    }
}
