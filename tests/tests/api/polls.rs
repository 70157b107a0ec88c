//! Polls: ETA and poll hints follow the formulas of docs/DESIGN.md.

use crate::paused_app;
use serde_json::json;
use vestibule_tests::{both_stores, Backend};

both_stores!(eta_and_poll_hints_follow_the_design_formulas,);

/// docs/DESIGN.md: ETA = ⌈position ÷ rate × 1.2⌉; hint = max(1 s, min(tier, ½ ETA)).
fn expected_hint(position: u64, rate: f64) -> u64 {
    let tier = match position {
        0..=10 => 3000,
        11..=100 => 10_000,
        _ => 30_000,
    };
    let half_eta_ms = (position as f64 / rate * 1.2 * 1000.0 / 2.0) as u64;
    tier.min(half_eta_ms).max(1000)
}

async fn eta_and_poll_hints_follow_the_design_formulas(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let mut tickets = Vec::new();
    for _ in 0..102 {
        tickets.push(app.join("main", None).await.1);
    }
    // Paused: ETA null, the hint as at the configured rate (175/s: 51 are admitted in a
    // third of a second once resumed, so the floor).
    let paused = app.poll("main", &tickets[50].ticket_id).await;
    assert_eq!(paused.eta_seconds, None);
    assert_eq!(paused.next_poll_after_ms, expected_hint(51, 175.0));

    // Slow rate: the tier dominates at the edges 10/11 and 100/101.
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 0.01}),
    )
    .await;
    for place in [10usize, 11, 100, 101] {
        let status = app.poll("main", &tickets[place - 1].ticket_id).await;
        let position = status.position.expect("still waiting");
        assert_eq!(
            status.eta_seconds,
            Some((position as f64 / 0.01 * 1.2).ceil() as u64)
        );
        assert_eq!(
            status.next_poll_after_ms,
            expected_hint(position, 0.01),
            "place {place}"
        );
    }
    let at_10 = app.poll("main", &tickets[9].ticket_id).await;
    let at_11 = app.poll("main", &tickets[10].ticket_id).await;
    let at_101 = app.poll("main", &tickets[100].ticket_id).await;
    assert_eq!(
        (
            at_10.next_poll_after_ms,
            at_11.next_poll_after_ms,
            at_101.next_poll_after_ms
        ),
        (3000, 10_000, 30_000)
    );

    // Faster rate: half the ETA caps the hint (50 at 10/s → ETA 6 s → 3 s).
    app.patch_room("main", json!({"admissionRatePerSec": 10.0, "paused": true}))
        .await;
    let status = app.poll("main", &tickets[60].ticket_id).await;
    let position = status.position.unwrap();
    app.patch_room("main", json!({"paused": false})).await;
    let status = app.poll("main", &tickets[60].ticket_id).await;
    let position_now = status.position.unwrap();
    assert!(position_now <= position);
    assert_eq!(
        status.eta_seconds,
        Some((position_now as f64 / 10.0 * 1.2).ceil() as u64)
    );
    assert_eq!(status.next_poll_after_ms, expected_hint(position_now, 10.0));
    assert!(
        status.next_poll_after_ms < 10_000,
        "½ ETA beats the tier here"
    );
}
