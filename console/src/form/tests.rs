use serde_json::json;

use super::*;
use crate::local_time::FixedOffset;

const SEOUL: FixedOffset = FixedOffset(9 * 60);

fn form(fields: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    fields
        .iter()
        .map(|(api, text)| (*api, (*text).to_owned()))
        .collect()
}

#[test]
fn a_create_form_sends_what_was_typed_and_leaves_the_rest_to_the_server() {
    let patch = patch(
        &Value::Null,
        &form(&[
            ("displayNameEn", "Drop 8"),
            ("displayNameKo", ""),
            ("prequeueOpensAt", "2026-11-27T14:05"),
            ("opensAt", "2026-11-27T14:10"),
            ("stock", "5"),
            ("queueingMethod", "fifo"),
            ("admissionRatePerSec", "175"),
            ("tokenTtlSecs", ""),
            ("maxActiveUsers", ""),
            ("soldOutMessageEn", "All gone."),
        ]),
        &SEOUL,
    )
    .unwrap();
    assert_eq!(
        patch,
        json!({
            "displayNameEn": "Drop 8",
            "prequeueOpensAt": "2026-11-27T05:05:00Z",
            "opensAt": "2026-11-27T05:10:00Z",
            "stock": 5,
            "queueingMethod": "fifo",
            "admissionRatePerSec": 175.0,
            "soldOutMessageEn": "All gone.",
        })
    );
}

#[test]
fn an_edit_sends_only_changes_and_null_for_a_cleared_field() {
    let current = json!({
        "admissionRatePerSec": 175.0, "tokenTtlSecs": 300, "stock": 5, "maxActiveUsers": null,
        "opensAt": "2026-11-27T05:10:00Z", "messageEn": "Hi", "queueingMethod": "fifo",
    });
    let patch = patch(
        &current,
        &form(&[
            ("admissionRatePerSec", "35"),
            ("tokenTtlSecs", ""),
            ("stock", "5"),
            ("maxActiveUsers", ""),
            ("opensAt", "2026-11-27T14:10"),
            ("messageEn", ""),
            ("queueingMethod", "fifo"),
        ]),
        &SEOUL,
    )
    .unwrap();
    assert_eq!(
        patch,
        json!({"admissionRatePerSec": 35.0, "messageEn": null})
    );
}

#[test]
fn values_out_of_the_shared_bounds_are_refused_with_them() {
    let refused =
        |api: &'static str, text: &str| patch(&Value::Null, &form(&[(api, text)]), &SEOUL);
    assert_eq!(
        refused("admissionRatePerSec", "100001"),
        Err((Text::RatePerSec, "0–100000 shoppers/s".into()))
    );
    assert_eq!(
        refused("tokenTtlSecs", "0"),
        Err((Text::TokenTtl, "1–86400".into()))
    );
    assert!(refused("stock", "-1").is_err());
    assert!(refused("stock", "1000000001").is_err());
    assert!(refused("maxActiveUsers", "0").is_err());
    assert!(refused("displayNameEn", &"x".repeat(101)).is_err());
    assert!(refused("opensAt", "soon").is_err());
    assert!(refused("checkoutUrl", "javascript:alert(1)").is_err());
    assert!(refused("checkoutUrl", "https://shop.example/checkout").is_ok());
    assert!(refused("checkoutUrl", "/checkout").is_ok());
    assert!(refused("queueingMethod", "lifo").is_err());
}

#[test]
fn a_form_shows_settings_in_local_time() {
    let opens = by_api("opensAt").unwrap();
    assert_eq!(
        shown(opens, &json!("2026-11-27T05:10:00Z"), &SEOUL),
        "2026-11-27T14:10"
    );
    assert_eq!(shown(by_api("stock").unwrap(), &json!(5), &SEOUL), "5");
    assert_eq!(
        shown(by_api("admissionRatePerSec").unwrap(), &json!(17.5), &SEOUL),
        "17.5"
    );
    assert_eq!(
        shown(by_api("maxActiveUsers").unwrap(), &Value::Null, &SEOUL),
        ""
    );
}

#[test]
fn every_change_reads_before_and_after() {
    let now = SEOUL.to_ms(LocalTime::parse("2026-11-27T09:00").unwrap());
    let current =
        json!({"admissionRatePerSec": 175.0, "stock": null, "opensAt": null, "closed": false});
    let lines = |patch| before_after(Lang::En, &current, &patch, &SEOUL, now);
    assert_eq!(
        lines(json!({"admissionRatePerSec": 35})),
        ["Admission rate (people/s): 175/s → 35/s"]
    );
    assert_eq!(
        lines(json!({"stock": 5, "opensAt": "2026-11-27T05:10:00Z"})),
        // One line a field, in the patch's (alphabetical) order.
        [
            "Sale opens at: not set → 14:10",
            "Stock (units left): unlimited → 5",
        ]
    );
    assert_eq!(
        lines(json!({"closed": true})),
        ["Closed to new joins: no → yes"]
    );
    let created = settings_lines(Lang::En, &json!({"stock": 5}), &SEOUL, now);
    assert_eq!(created, ["Stock (units left): 5"]);
    let ko = before_after(
        Lang::Ko,
        &current,
        &json!({"admissionRatePerSec": 35}),
        &SEOUL,
        now,
    );
    assert_eq!(ko, ["입장 속도 (명/초): 175/초 → 35/초"]);
}

fn auto_form(switch: &str, numbers: [&str; 4]) -> Vec<(&'static str, String)> {
    let mut fields = vec![("autoRate", switch.to_owned())];
    fields.extend(
        auto::FIELDS
            .iter()
            .zip(numbers)
            .map(|(field, text)| (field.api, text.to_owned())),
    );
    fields
}

#[test]
fn auto_rate_is_one_object_sent_on_and_null_when_turned_off() {
    let on = auto_form("on", ["5", "40", "500", "1"]);
    assert_eq!(
        patch(&Value::Null, &on, &SEOUL).unwrap(),
        json!({"autoRate": {"min": 5.0, "max": 40.0, "targetP95Ms": 500, "maxErrorRate": 0.01}})
    );
    // Off on a new room: nothing sent.
    let off = auto_form("", ["", "", "", ""]);
    assert_eq!(patch(&Value::Null, &off, &SEOUL).unwrap(), json!({}));
    let current =
        json!({"autoRate": {"min": 5, "max": 40, "targetP95Ms": 500, "maxErrorRate": 0.01}});
    // The same numbers: no change; another: the whole object; off: null.
    assert_eq!(patch(&current, &on, &SEOUL).unwrap(), json!({}));
    let wider = auto_form("on", ["5", "60", "500", "0.5"]);
    assert_eq!(
        patch(&current, &wider, &SEOUL).unwrap(),
        json!({"autoRate": {"min": 5.0, "max": 60.0, "targetP95Ms": 500, "maxErrorRate": 0.005}})
    );
    assert_eq!(
        patch(&current, &auto_form("", ["5", "40", "500", "1"]), &SEOUL).unwrap(),
        json!({"autoRate": null})
    );
    // min above max is the server's to refuse (409 conflict): sent as typed.
    let crossed = auto_form("on", ["50", "10", "500", "1"]);
    assert_eq!(
        patch(&Value::Null, &crossed, &SEOUL).unwrap()["autoRate"]["min"],
        json!(50.0)
    );
}

#[test]
fn auto_rate_numbers_are_required_within_the_shared_bounds() {
    let refused = |numbers| patch(&Value::Null, &auto_form("on", numbers), &SEOUL);
    assert_eq!(
        refused(["", "40", "500", "1"]),
        Err((Text::AutoMin, "0–100000 shoppers/s".into()))
    );
    assert_eq!(
        refused(["5", "40", "5", "1"]),
        Err((Text::AutoTargetP95, "10–60000".into()))
    );
    assert_eq!(
        refused(["5", "40", "500", "51"]),
        Err((Text::AutoMaxErrors, "0–50%".into()))
    );
    assert!(refused(["5", "100001", "500", "1"]).is_err());
}

#[test]
fn auto_rate_reads_before_and_after_and_fills_the_form() {
    let current = json!({"autoRate": null});
    let on =
        json!({"autoRate": {"min": 5.0, "max": 40.0, "targetP95Ms": 500, "maxErrorRate": 0.01}});
    assert_eq!(
        before_after(Lang::En, &current, &on, &SEOUL, 0),
        ["Closed-loop admission (autoRate): off → 5–40/s · p95 ≤ 500 ms · errors ≤ 1%"]
    );
    assert_eq!(
        before_after(Lang::Ko, &on, &current, &SEOUL, 0),
        ["자동 입장 속도 조절 (autoRate): 5–40/초 · p95 ≤ 500 ms · 오류율 ≤ 1% → 꺼짐"]
    );
    assert_eq!(
        auto::shown_texts(&on, &SEOUL),
        [
            ("autoRate", "on".to_owned()),
            ("autoRate.min", "5".to_owned()),
            ("autoRate.max", "40".to_owned()),
            ("autoRate.targetP95Ms", "500".to_owned()),
            ("autoRate.maxErrorRate", "1".to_owned()),
            ("autoRate.healthUrl", String::new()),
        ]
    );
    assert_eq!(
        auto::shown_texts(&current, &SEOUL)[0],
        ("autoRate", String::new())
    );
}

#[test]
fn auto_rate_sends_a_health_url_when_typed_and_keeps_it_unless_cleared() {
    let with_url = |url: &str| {
        let mut form = auto_form("on", ["5", "40", "500", "1"]);
        form.push(("autoRate.healthUrl", url.to_owned()));
        form
    };
    let url = "https://shop.example/vestibule-health";
    assert_eq!(
        patch(&Value::Null, &with_url(url), &SEOUL).unwrap(),
        json!({"autoRate": {"min": 5.0, "max": 40.0, "targetP95Ms": 500, "maxErrorRate": 0.01,
                            "healthUrl": url}})
    );
    // Empty: none sent (no polling).
    assert!(
        patch(&Value::Null, &with_url(" "), &SEOUL).unwrap()["autoRate"]
            .get("healthUrl")
            .is_none()
    );
    // Not an absolute http(s) URL: refused here with the server's rule.
    let refused = patch(&Value::Null, &with_url("ftp://shop.example/h"), &SEOUL);
    assert_eq!(
        refused.map_err(|(label, _)| label),
        Err(Text::AutoHealthUrl)
    );
    // The same URL is no change; a cleared one sends the object without it.
    let current = json!({"autoRate": {"min": 5, "max": 40, "targetP95Ms": 500,
                                      "maxErrorRate": 0.01, "healthUrl": url}});
    assert_eq!(patch(&current, &with_url(url), &SEOUL).unwrap(), json!({}));
    let cleared = patch(&current, &with_url(""), &SEOUL).unwrap();
    assert_eq!(cleared["autoRate"]["min"], json!(5.0));
    assert!(cleared["autoRate"].get("healthUrl").is_none(), "{cleared}");
    assert_eq!(
        auto::shown_texts(&current, &SEOUL).last().cloned(),
        Some(("autoRate.healthUrl", url.to_owned()))
    );
    assert_eq!(
        before_after(Lang::En, &current, &cleared, &SEOUL, 0),
        [format!(
            "Closed-loop admission (autoRate): 5–40/s · p95 ≤ 500 ms · errors ≤ 1% · {url} → \
             5–40/s · p95 ≤ 500 ms · errors ≤ 1%"
        )]
    );
}
