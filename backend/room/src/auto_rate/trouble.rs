//! Where the origin struggled: the controller's trouble points, how a rate probes near them, and
//! when they are forgotten (the rate stayed past one, or the origin's capacity came back).

use super::{
    Controller, AS_MUCH, FASTER, FORGET_AFTER_MS, NEAR, PAST_TROUBLE_RISE_PER_SEC,
    PROBING_RISE_PER_SEC, TROUBLE_POINTS,
};

/// A rate at which the origin struggled.
#[derive(Debug, Clone, Copy)]
pub(super) struct Trouble {
    /// Shoppers per second.
    rate: f64,
    /// Since when the rate has stayed more than 10% above it.
    passed_since_ms: Option<u64>,
    /// Of the steady readings whose load was offered near it ([`NEAR`]) since it was recorded,
    /// the one with the lowest p95: (offered rate, p95 ms), how fast the origin answers there at
    /// its present capacity.
    fastest_near: Option<(f64, f64)>,
}

impl Controller {
    /// The origin struggled at `rate` (a measured capacity or the rate that overloaded it).
    pub(super) fn troubled(&mut self, rate: f64, now_ms: u64) {
        self.last_cut_ms = Some(now_ms);
        // Points within 10% of this one or under it are old news: the origin struggles here now.
        // Higher ones stay (a capacity it had, and may have again); when full, the oldest goes
        // but the highest, which is the last to be forgotten. What was measured near a point this
        // one replaces, since it was recorded, still says how the origin answers here.
        let replaced = self
            .troubles
            .iter()
            .filter(|trouble| trouble.rate <= rate * 1.1 && trouble.rate >= rate * NEAR.0)
            .filter_map(|trouble| trouble.fastest_near)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        self.troubles.retain(|trouble| trouble.rate > rate * 1.1);
        if self.troubles.len() == TROUBLE_POINTS {
            let highest = self.highest_trouble();
            let oldest = self
                .troubles
                .iter()
                .position(|trouble| Some(trouble.rate) != highest)
                .unwrap_or(0);
            self.troubles.remove(oldest);
        }
        self.troubles.push(Trouble {
            rate,
            passed_since_ms: None,
            // Only latencies measured near this rate since the origin struggled here say how it
            // answers here now: ones from before may be of another capacity.
            fastest_near: replaced,
        });
    }

    /// Notes a reading under the targets at `rate`, whose load was `offered` and answered with
    /// `p95_ms` (`steady`: neither just after a cut nor draining), against the trouble points. A
    /// point is forgotten once the rate has stayed more than 10% above it for
    /// [`FORGET_AFTER_MS`] on readings that show no queue (`queueing`, a p95 a bucket or more
    /// above its floor, restarts that time: a point measured under the origin's true capacity is
    /// passed by 10% while a queue forms, and forgetting it there sends the rate up 8% a second
    /// into the capacity), or at once when a load offered near it ([`NEAR`]) is answered with a
    /// p95 under [`FASTER`] × the lowest the origin had near it before for a load as high: the
    /// same load answered much faster means its capacity came back (then only the highest point,
    /// if above, stays). Else a steady reading joins what was measured near each point. Every
    /// such reading counts, the ones near the target too: a rate held there after a cut is how
    /// the origin answers at its lower capacity.
    pub(super) fn heard(
        &mut self,
        rate: f64,
        (offered, p95_ms): (f64, f64),
        (steady, queueing): (bool, bool),
        now_ms: u64,
    ) {
        let near_it =
            |trouble: &Trouble| (trouble.rate * NEAR.0..=trouble.rate * NEAR.1).contains(&offered);
        // The highest point whose load is answered much faster now: the capacity came back.
        let mut came_back: Option<f64> = None;
        for trouble in &mut self.troubles {
            trouble.passed_since_ms = (rate > trouble.rate * 1.1).then(|| {
                trouble
                    .passed_since_ms
                    .filter(|_| !queueing)
                    .unwrap_or(now_ms)
            });
            let faster = near_it(trouble)
                && trouble.fastest_near.is_some_and(|(at, fastest)| {
                    offered >= at * AS_MUCH && p95_ms < fastest * FASTER
                });
            if faster {
                came_back = Some(came_back.map_or(trouble.rate, |r| r.max(trouble.rate)));
            }
        }
        let passed = |trouble: &Trouble| {
            trouble
                .passed_since_ms
                .is_some_and(|since| now_ms.saturating_sub(since) >= FORGET_AFTER_MS)
        };
        let highest = self
            .troubles
            .iter()
            .filter(|trouble| !passed(trouble))
            .map(|trouble| trouble.rate)
            .reduce(f64::max);
        self.troubles.retain(|trouble| {
            // The points of the lower capacity go; only the highest stays, where the origin
            // struggled at its best.
            let lower_capacity =
                came_back.is_some_and(|rate| Some(trouble.rate) != highest || trouble.rate <= rate);
            !passed(trouble) && !lower_capacity
        });
        for trouble in self.troubles.iter_mut().filter(|_| steady) {
            if near_it(trouble) && trouble.fastest_near.is_none_or(|(_, p)| p95_ms < p) {
                trouble.fastest_near = Some((offered, p95_ms));
            }
        }
    }

    /// How fast a healthy `rate` probes near where the origin struggled (after [`Self::heard`]):
    /// [`PROBING_RISE_PER_SEC`] within 10% under a trouble point, [`PAST_TROUBLE_RISE_PER_SEC`]
    /// at or past one not yet forgotten; `None` far from all of them.
    pub(super) fn probing(&self, rate: f64) -> Option<f64> {
        let mut near = self
            .troubles
            .iter()
            .filter(|trouble| rate >= trouble.rate * 0.9)
            .peekable();
        near.peek()?;
        if near.any(|trouble| rate >= trouble.rate) {
            Some(PAST_TROUBLE_RISE_PER_SEC)
        } else {
            Some(PROBING_RISE_PER_SEC)
        }
    }

    /// The highest trouble point's rate, if any.
    fn highest_trouble(&self) -> Option<f64> {
        self.troubles
            .iter()
            .map(|trouble| trouble.rate)
            .reduce(f64::max)
    }

    /// The trouble points' rates (shoppers/s), oldest first: where the rate slows as it rises.
    pub fn trouble_points(&self) -> Vec<f64> {
        self.troubles.iter().map(|trouble| trouble.rate).collect()
    }
}
