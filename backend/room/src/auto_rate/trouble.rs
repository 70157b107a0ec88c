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

    /// How fast a healthy `rate` probes near where the origin struggled: [`PROBING_RISE_PER_SEC`]
    /// within 10% under a trouble point, [`PAST_TROUBLE_RISE_PER_SEC`] at or past one that is not
    /// yet forgotten; `None` far from all of them. A point is forgotten once the rate has stayed
    /// more than 10% above it for [`FORGET_AFTER_MS`], or at once when a load `offered` near it
    /// ([`NEAR`]) is answered with a p95 (`p95_ms`) under [`FASTER`] × the lowest the origin had
    /// near it before for a load as high: the same load answered much faster means its capacity
    /// came back (then only the highest point, if above, stays). Else a `steady` reading (neither just after a cut
    /// nor draining) joins what was measured near each point.
    pub(super) fn probing(
        &mut self,
        rate: f64,
        (offered, p95_ms, steady): (f64, f64, bool),
        now_ms: u64,
    ) -> Option<f64> {
        for trouble in &mut self.troubles {
            trouble.passed_since_ms =
                (rate > trouble.rate * 1.1).then(|| trouble.passed_since_ms.unwrap_or(now_ms));
        }
        let near_it =
            |trouble: &Trouble| (trouble.rate * NEAR.0..=trouble.rate * NEAR.1).contains(&offered);
        // The same load answered much faster: the capacity came back. The points of the lower
        // capacity go; only the highest stays, where the origin struggled at its best.
        let came_back = self
            .troubles
            .iter()
            .filter(|trouble| {
                near_it(trouble)
                    && trouble.fastest_near.is_some_and(|(at, fastest)| {
                        offered >= at * AS_MUCH && p95_ms < fastest * FASTER
                    })
            })
            .map(|trouble| trouble.rate)
            .reduce(f64::max);
        self.troubles.retain(|trouble| {
            let passed = trouble
                .passed_since_ms
                .is_some_and(|since| now_ms.saturating_sub(since) >= FORGET_AFTER_MS);
            !passed
        });
        if came_back.is_some() {
            let highest = self.highest_trouble();
            self.troubles.retain(|trouble| {
                Some(trouble.rate) == highest && came_back.is_some_and(|rate| trouble.rate > rate)
            });
        }
        for trouble in self.troubles.iter_mut().filter(|_| steady) {
            if near_it(trouble) && trouble.fastest_near.is_none_or(|(_, p)| p95_ms < p) {
                trouble.fastest_near = Some((offered, p95_ms));
            }
        }
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
