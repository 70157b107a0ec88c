//! The capacity calculator: from the checkout's connection pool, its average checkout time and
//! a utilization target, the admission rate the checkout can take; from the P95 checkout time,
//! the entry token TTL and the expected checkout (the ETA's pace under a cap until checkouts are
//! measured). "Apply" sets the three on the room (with the controls' confirmation). Its inputs
//! are kept per room in the browser's `localStorage`: opening another room and back keeps them.

use leptos::prelude::*;
use serde_json::json;

use crate::controls::Changes;
use crate::i18n::{t, Text};
use crate::state::Console;

/// The admission rate a checkout sustains: `pool ÷ average seconds × utilization`
/// (50 connections, 200 ms, 70 % → 175/s); `None` for inputs out of range.
pub fn admission_rate(pool: f64, average_ms: f64, utilization_percent: f64) -> Option<f64> {
    let ok = pool > 0.0 && average_ms > 0.0 && (0.0..=100.0).contains(&utilization_percent);
    ok.then(|| pool / (average_ms / 1000.0) * utilization_percent / 100.0)
        .filter(|rate| rate.is_finite() && *rate <= 100_000.0)
}

/// The entry token TTL for a P95 checkout time: half as long again, so 19 in 20 shoppers finish
/// with room to spare and an abandoned token frees its slot soon (whole seconds, 1–86400).
pub fn token_ttl_secs(p95_secs: f64) -> Option<u64> {
    (p95_secs > 0.0 && p95_secs.is_finite())
        .then(|| (p95_secs * 1.5).ceil() as u64)
        .map(|secs| secs.clamp(1, 86_400))
}

/// A shopper's expected (average) checkout for a P95 checkout time: about half the P95 (whole
/// seconds, 1–86400).
pub fn expected_checkout_secs(p95_secs: f64) -> Option<u64> {
    (p95_secs > 0.0 && p95_secs.is_finite())
        .then(|| (p95_secs / 2.0).ceil() as u64)
        .map(|secs| secs.clamp(1, 86_400))
}

/// Where a room's calculator inputs are kept (`localStorage`, this browser).
fn inputs_key(room: &str) -> String {
    format!("vestibule-console:calculator:{room}")
}

/// The inputs kept for `room` (pool, average ms, utilization %, P95 s), else the example's.
fn load_inputs(room: &str) -> [String; 4] {
    let kept = window()
        .local_storage()
        .ok()
        .flatten()
        .and_then(|storage| storage.get_item(&inputs_key(room)).ok().flatten());
    parse_inputs(kept.as_deref())
}

/// Kept inputs (`50|200|70|240`) read back; the example's when there are none.
pub fn parse_inputs(kept: Option<&str>) -> [String; 4] {
    let example = ["50", "200", "70", "240"].map(str::to_owned);
    let Some(kept) = kept else { return example };
    let parts: Vec<&str> = kept.split('|').collect();
    match parts.as_slice() {
        [a, b, c, d] => [a, b, c, d].map(|part| (*part).to_owned()),
        _ => example,
    }
}

fn save_inputs(room: &str, inputs: &[String; 4]) {
    if let Some(storage) = window().local_storage().ok().flatten() {
        let _ = storage.set_item(&inputs_key(room), &inputs.join("|"));
    }
}

/// A number field's value.
fn number(text: &str) -> f64 {
    text.trim().replace(',', ".").parse().unwrap_or(f64::NAN)
}

/// The calculator for the selected room.
#[component]
pub fn Calculator(console: Console, room: String, changes: Changes) -> impl IntoView {
    let lang = console.lang;
    // The inputs as last typed for this room (kept in the browser), else the example's.
    let kept = load_inputs(&room);
    let [pool, average, utilization, p95] = kept.map(RwSignal::new);
    let keep_room = room.clone();
    Effect::new(move |_| {
        let inputs = [pool.get(), average.get(), utilization.get(), p95.get()];
        save_inputs(&keep_room, &inputs);
    });
    let rate = Signal::derive(move || {
        admission_rate(
            number(&pool.get()),
            number(&average.get()),
            number(&utilization.get()),
        )
        .map(|rate| (rate * 10.0).round() / 10.0)
    });
    let ttl = Signal::derive(move || token_ttl_secs(number(&p95.get())));
    let field = move |id: &'static str, label: Text, value: RwSignal<String>| {
        view! {
            <div class="field">
                <label for=id>{move || t(lang.get(), label)}</label>
                <input id=id type="number" inputmode="decimal" min="0" step="any"
                    prop:value=move || value.get()
                    on:input=move |event| value.set(event_target_value(&event)) />
            </div>
        }
    };
    let apply = move |_| {
        let (Some(rate), Some(ttl)) = (rate.get_untracked(), ttl.get_untracked()) else {
            return;
        };
        let expected = expected_checkout_secs(number(&p95.get_untracked()));
        changes.apply(
            &room,
            json!({
                "admissionRatePerSec": rate,
                "tokenTtlSecs": ttl,
                "expectedCheckoutSecs": expected,
            }),
            None,
        );
    };
    view! {
        <section class="panel" aria-labelledby="calculator-title">
            <h2 id="calculator-title">{move || t(lang.get(), Text::Calculator)}</h2>
            <p class="help">{move || t(lang.get(), Text::CalculatorHelp)}</p>
            <div class="fields">
                {field("calc-pool", Text::PoolSize, pool)}
                {field("calc-average", Text::AvgCheckoutMs, average)}
                {field("calc-utilization", Text::Utilization, utilization)}
                {field("calc-p95", Text::P95CheckoutSecs, p95)}
            </div>
            <dl class="figures compact" aria-live="polite">
                <div>
                    <dt>{move || t(lang.get(), Text::SuggestedRate)}</dt>
                    <dd id="calc-rate">{move || rate.get().map_or("–".into(), |r| format!("{r} {}", t(lang.get(), Text::PerSec)))}</dd>
                </div>
                <div>
                    <dt>{move || t(lang.get(), Text::SuggestedTtl)}</dt>
                    <dd id="calc-ttl">{move || ttl.get().map_or("–".into(), |s| format!("{s} {}", t(lang.get(), Text::Seconds)))}</dd>
                </div>
            </dl>
            <button type="button" id="calc-apply" on:click=apply
                disabled=move || rate.get().is_none() || ttl.get().is_none()>
                {move || t(lang.get(), Text::ApplySuggestion)}
            </button>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example_gives_175_per_second() {
        let rate = admission_rate(50.0, 200.0, 70.0).unwrap();
        assert!((rate - 175.0).abs() < 1e-9, "{rate}");
        assert_eq!(admission_rate(0.0, 200.0, 70.0), None);
        assert_eq!(admission_rate(50.0, 0.0, 70.0), None);
        assert_eq!(admission_rate(50.0, 200.0, 170.0), None);
    }

    #[test]
    fn the_ttl_is_half_again_the_p95() {
        assert_eq!(token_ttl_secs(240.0), Some(360));
        assert_eq!(token_ttl_secs(0.3), Some(1));
        assert_eq!(token_ttl_secs(0.0), None);
        assert_eq!(token_ttl_secs(1e9), Some(86_400));
    }

    #[test]
    fn kept_inputs_come_back_and_the_example_fills_in() {
        assert_eq!(
            parse_inputs(Some("80|150|60|90")),
            ["80", "150", "60", "90"]
        );
        assert_eq!(parse_inputs(None), ["50", "200", "70", "240"]);
        assert_eq!(parse_inputs(Some("junk")), ["50", "200", "70", "240"]);
    }

    #[test]
    fn the_expected_checkout_is_half_the_p95() {
        assert_eq!(expected_checkout_secs(240.0), Some(120));
        assert_eq!(expected_checkout_secs(0.3), Some(1));
        assert_eq!(expected_checkout_secs(f64::NAN), None);
    }
}
