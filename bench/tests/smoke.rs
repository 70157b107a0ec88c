//! Smoke test of the load generator: the real `vestibule-bench run --profile tiny` against the
//! real `vestibule` binary on a private redis-server, in a few seconds. It asserts what the
//! benchmark promises to measure, so a broken shopper model or a broken server fails here.

use std::process::Command;

use serde_json::Value;
// The black-box suite's locator: `$VESTIBULE_BIN`, else `target/<profile>/vestibule`.
use vestibule_tests::vestibule_binary;

fn number(values: &Value, name: &str) -> f64 {
    values[name]
        .as_f64()
        .unwrap_or_else(|| panic!("figure {name} missing from the report: {values:#}"))
}

#[test]
fn a_tiny_flash_sale_admits_every_shopper_in_arrival_order_and_holds_its_sse_streams() {
    let dir = std::env::temp_dir().join(format!("vestibule-bench-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let json = dir.join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_vestibule-bench"))
        .args([
            "run",
            "--profile",
            "tiny",
            "--stages",
            "sale,position,sse,sse-h2",
        ])
        .arg("--vestibule-bin")
        .arg(vestibule_binary())
        .arg("--json")
        .arg(&json)
        .output()
        .expect("vestibule-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "vestibule-bench failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("| figure | measured |"),
        "no table:\n{stdout}"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON report")).expect("JSON");
    let _ = std::fs::remove_dir_all(&dir);
    let values = &report["values"];
    let context = format!("{stdout}\n{stderr}");

    let shoppers = number(values, "shoppers");
    assert!(shoppers >= 100.0, "{context}");
    assert_eq!(number(values, "shoppers_joined"), shoppers, "{context}");
    assert_eq!(number(values, "shoppers_admitted"), shoppers, "{context}");
    assert_eq!(number(values, "shoppers_ordered"), shoppers, "{context}");
    assert!(number(values, "shoppers_sse") > 0.0, "{context}");
    assert_eq!(number(values, "shoppers_position_rose"), 0.0, "{context}");
    assert_eq!(number(values, "kendall_tau_discordant"), 0.0, "{context}");
    assert!(number(values, "kendall_tau_comparable") > 0.0, "{context}");
    let largest = number(values, "largest_tick");
    assert!(largest > 0.0, "{context}");
    // A late tick may pay its carry, never more than one tick's quota plus one.
    assert!(
        largest <= number(values, "nominal_tick_quota") + 1.0,
        "{context}"
    );
    assert!(number(values, "eta_on_time_share") >= 0.95, "{context}");

    assert_eq!(
        number(values, "position_large_waiting"),
        2_000.0,
        "{context}"
    );
    assert!(number(values, "position_small_p50_ms") > 0.0, "{context}");

    // The server's memory is read (50 streams may fit in pages its threads already hold, so the
    // growth per stream can be 0 at this size; the short profile's 10,000 cannot).
    assert_eq!(number(values, "sse_held"), 50.0, "{context}");
    assert!(
        number(values, "sse_rss_base_bytes") > 1_000_000.0,
        "{context}"
    );
    assert!(
        number(values, "sse_rss_per_stream_bytes").is_finite(),
        "{context}"
    );
    // The same streams multiplexed over h2c connections.
    assert_eq!(number(values, "sse_h2_held"), 50.0, "{context}");
    assert!(
        number(values, "sse_h2_rss_base_bytes") > 1_000_000.0,
        "{context}"
    );
}
