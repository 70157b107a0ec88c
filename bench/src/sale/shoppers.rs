//! The rows on shoppers: how many got how far, joins and polls answered, arrival vs admission
//! order, and the first ETA shown vs the actual wait.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::analysis::{fifo_discordance, quantile};
use crate::flash_sale::{FlashSaleRun, Shopper};
use crate::http::{short, Percentiles};
use crate::position_cost::fmt_count;
use crate::profile::Profile;
use crate::report::{Report, Verdict};

use super::Observed;

/// How many shoppers got how far.
pub(super) struct ShopperCounts {
    total: u64,
    joined: u64,
    admitted: u64,
    ordered: u64,
    rose: u64,
    sse: u64,
    first_error: Option<String>,
}

impl ShopperCounts {
    pub(super) fn of(shoppers: &[Shopper], admitted_at: &HashMap<String, u64>) -> Self {
        let count = |keep: fn(&Shopper) -> bool| shoppers.iter().filter(|s| keep(s)).count() as u64;
        Self {
            total: shoppers.len() as u64,
            joined: count(|s| s.ticket_id.is_some()),
            admitted: admitted_at.len() as u64,
            ordered: count(|s| s.order_status == Some(201)),
            rose: count(|s| s.position_rose),
            sse: count(|s| s.used_sse),
            first_error: shoppers.iter().find_map(|s| s.error.clone()),
        }
    }

    pub(super) fn report_values(&self, report: &mut Report) {
        report.value("shoppers", self.total);
        report.value("shoppers_joined", self.joined);
        report.value("shoppers_admitted", self.admitted);
        report.value("shoppers_ordered", self.ordered);
        report.value("shoppers_position_rose", self.rose);
        report.value("shoppers_sse", self.sse);
    }

    /// The rows on what shoppers saw go wrong: a position that rose, an order that failed.
    pub(super) fn report_outcomes(&self, report: &mut Report) {
        report.row(
            "Shoppers whose position ever rose",
            format!("{} of {}", fmt_count(self.rose), fmt_count(self.joined)),
            "none",
            Verdict::from(self.rose == 0),
            format!(
                "every poll and SSE event compared with the last one ({} on SSE)",
                fmt_count(self.sse)
            ),
        );
        report.row(
            "Admitted shoppers whose order went through (token used once)",
            format!(
                "{} of {} admitted",
                fmt_count(self.ordered),
                fmt_count(self.admitted)
            ),
            "all",
            Verdict::from(self.ordered == self.admitted && self.admitted == self.joined),
            self.first_error
                .as_ref()
                .map(|e| format!("first shopper error: {e}"))
                .unwrap_or_else(|| "no shopper error".into()),
        );
    }
}

/// Joins during the spike: answered per second, at the curve's peak.
pub(super) fn report_joins(
    profile: &Profile,
    observed: &Observed,
    counts: &ShopperCounts,
    report: &mut Report,
) {
    let shared = &observed.sale.shared;
    let peak_joins = shared
        .joins_per_sec
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    let join_p = Percentiles::of(&shared.joins.snapshot());
    let (joined, total) = (counts.joined, counts.total);
    report.value("sale_peak_joins_per_sec", peak_joins);
    report.value("sale_join_p99_ms", join_p.p99_ms);
    report.row(
        "Flash sale: joins answered per second at the spike, p50/p99/p99.9",
        format!(
            "{} /s at peak (offered {} /s), {}",
            fmt_count(peak_joins),
            fmt_count(profile.spike_per_sec as u64),
            join_p.triple()
        ),
        format!("keeps up with {} /s", fmt_count(profile.spike_per_sec as u64)),
        Verdict::from(joined == total && peak_joins as f64 >= 0.95 * profile.spike_per_sec.min(total as f64)),
        format!(
            "{}/{} shoppers got a ticket; latency counted from each shopper's arrival; CPU while arriving: {}; whole run: {}",
            fmt_count(joined),
            fmt_count(total),
            observed.spike_cpu,
            observed.cpu_summary
        ),
    );
}

pub(super) fn report_polls(sale: &FlashSaleRun, report: &mut Report) {
    let poll_series: Vec<u64> = sale
        .shared
        .polls_per_sec
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    let poll_total: u64 = poll_series.iter().sum();
    let poll_peak = poll_series.iter().copied().max().unwrap_or(0);
    let poll_p = Percentiles::of(&sale.shared.polls.snapshot());
    report.value("sale_polls", poll_total);
    report.row(
        "Flash sale: polls by nextPollAfterMs, p50/p99/p99.9",
        format!(
            "{} polls, {} /s mean, {} /s peak, {}",
            fmt_count(poll_total),
            short(poll_total as f64 / sale.secs.max(1.0)),
            fmt_count(poll_peak),
            poll_p.triple()
        ),
        "–",
        Verdict::Info,
        "the shopper model polls as told (30 s far back, ≥ 1 s near the front): the hint keeps poll load low; capacity is measured below",
    );
}

/// FIFO: arrival (join answered before the other was sent) vs admission order.
pub(super) fn report_fifo(
    shoppers: &[Shopper],
    admitted_at: &HashMap<String, u64>,
    report: &mut Report,
) {
    let order: Vec<(u64, u64, u64)> = shoppers
        .iter()
        .filter(|s| s.ticket_id.is_some())
        .map(|s| {
            let at = s
                .ticket_id
                .as_deref()
                .and_then(|id| admitted_at.get(id).copied())
                .unwrap_or(u64::MAX);
            (s.join_sent_us, s.join_answered_us, at)
        })
        .collect();
    let (discordant, comparable) = fifo_discordance(&order);
    report.value("kendall_tau_discordant", discordant);
    report.value("kendall_tau_comparable", comparable);
    report.row(
        "Kendall-tau distance, arrival vs admission order",
        format!(
            "{} discordant of {} ordered pairs ({:.2e})",
            fmt_count(discordant),
            fmt_count(comparable),
            discordant as f64 / comparable.max(1) as f64
        ),
        "0 (FIFO room)",
        Verdict::from(discordant == 0 && comparable > 0),
        "pairs ordered when one join was answered before the other was sent; same-tick admissions tie",
    );
}

/// ETA honesty: the first ETA each shopper was shown against its actual wait.
#[derive(Default)]
pub(super) struct EtaHonesty {
    on_time: u64,
    judged: u64,
    /// Actual wait ÷ first ETA shown, per admitted shopper shown a non-zero ETA.
    ratios: Vec<f64>,
    waited_sum: f64,
    shown_sum: f64,
}

impl EtaHonesty {
    pub(super) fn of(shoppers: &[Shopper], admitted_at: &HashMap<String, u64>) -> Self {
        let mut eta = Self::default();
        for shopper in shoppers {
            let (Some(id), Some(first_eta)) = (&shopper.ticket_id, shopper.first_eta_secs) else {
                continue;
            };
            let shown_ms = first_eta as f64 * 1000.0;
            eta.judged += 1;
            // Never admitted: late (the drain outlasted its ETA, or it gave up).
            let Some(&at) = admitted_at.get(id.as_str()) else {
                continue;
            };
            let waited = at.saturating_sub(shopper.join_answered_unix_ms) as f64;
            if waited <= shown_ms {
                eta.on_time += 1;
            }
            if shown_ms > 0.0 {
                eta.ratios.push(waited / shown_ms);
            }
            eta.waited_sum += waited;
            eta.shown_sum += shown_ms;
        }
        eta
    }

    pub(super) fn report(&self, report: &mut Report) {
        let share = self.on_time as f64 / self.judged.max(1) as f64;
        let median_ratio = quantile(&self.ratios, 0.5);
        let aggregate_ratio = self.waited_sum / self.shown_sum.max(1.0);
        report.value("eta_on_time_share", share);
        report.value("eta_ratio_median", median_ratio);
        report.value("eta_ratio_aggregate", aggregate_ratio);
        report.row(
            "Shoppers admitted no later than the first ETA shown",
            format!(
                "{:.1}% ({} of {})",
                share * 100.0,
                fmt_count(self.on_time),
                fmt_count(self.judged)
            ),
            "≥ 95%",
            Verdict::from(share >= 0.95),
            "ETA (median) = position ÷ effective rate × 1.2, rounded up to whole seconds",
        );
        report.row(
            "Actual / shown wait",
            format!(
                "median {:.2}, p10 {:.2}, p90 {:.2}; Σactual/Σshown {:.2}",
                median_ratio,
                quantile(&self.ratios, 0.1),
                quantile(&self.ratios, 0.9),
                aggregate_ratio
            ),
            "≥ 0.7",
            Verdict::from(median_ratio >= 0.7 && aggregate_ratio >= 0.7),
            "1/(1 + margin) = 0.83 expected at a steady rate; the front of the queue waits < 1 s but is shown ≥ 1 s",
        );
    }
}
