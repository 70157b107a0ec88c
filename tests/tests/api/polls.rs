//! Polls: ETA and poll hints follow the formulas of docs/DESIGN.md, and polls answered from
//! memory (docs/DESIGN.md "Polls answered from memory") are exact or larger, never smaller, and
//! keep their holders heard.

use std::time::Duration;

use crate::paused_app;
use serde_json::json;
use vestibule_shared::{TicketState, TicketStatus};
use vestibule_tests::{both_stores, Backend, TestApp};

both_stores!(
    eta_and_poll_hints_follow_the_design_formulas,
    polls_answered_from_memory_are_never_too_small_and_keep_their_holders_heard,
);

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

/// The counter of polls answered from memory in room `main`.
pub(crate) const FROM_MEMORY: &str = "vestibule_polls_from_memory_total{room=\"main\"}";

/// Polls every ticket of `ids` once, in order; the statuses.
async fn poll_each(app: &TestApp, ids: &[String]) -> Vec<TicketStatus> {
    let mut statuses = Vec::with_capacity(ids.len());
    for id in ids {
        statuses.push(app.poll("main", id).await);
    }
    statuses
}

/// Positions of `statuses`, 0 for a ticket not waiting.
fn positions(statuses: &[TicketStatus]) -> Vec<u64> {
    statuses.iter().map(|s| s.position.unwrap_or(0)).collect()
}

/// Asserts each answer is at or above its true place, and at most `over` above.
fn assert_within(answers: &[u64], truth: &[u64], over: u64, what: &str) {
    for (i, (answer, truth)) in answers.iter().zip(truth).enumerate() {
        assert!(
            *answer >= *truth && *answer <= truth + over,
            "{what}: ticket {i} answered {answer}, its place is {truth}\n{answers:?}"
        );
    }
}

/// A refresh every 100 ms, one poll tier of 1 s, an abandon time of 4 s (half of it is more than
/// 3 refreshes and a second, so polls may be answered from memory), a room at 1 admission per
/// second (paused): every ticket behind position 3 may be answered from memory. Then, checked
/// against the places the store gives (the truth):
/// - the second round of polls is answered from memory and exact;
/// - right after two leave (through this process) and after admissions, answers are never too
///   small, and exact again after a few refreshes; the one that left is `LEFT` at once;
/// - kept polling for twice the abandon time, mostly from memory, nobody is skipped;
/// - a skipped ticket that comes back ahead raises every answer behind it at once.
async fn polls_answered_from_memory_are_never_too_small_and_keep_their_holders_heard(
    backend: Backend,
) {
    let app = paused_app(
        backend,
        &["--sse-refresh-ms", "100", "--poll-tiers", "*:1000"],
    )
    .await;
    app.patch_room(
        "main",
        json!({"admissionRatePerSec": 1, "abandonAfterSecs": 4, "holdPlaceSecs": 600}),
    )
    .await;
    let mut ids: Vec<String> = Vec::new();
    for _ in 0..40 {
        ids.push(app.join("main", None).await.1.ticket_id);
    }
    // A ghost that will be skipped: joined first, never polled again.
    let ghost = ids.remove(0);
    let first = poll_each(&app, &ids).await;
    assert_eq!(positions(&first), (2..=40).collect::<Vec<u64>>());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = app.metric(FROM_MEMORY).await;
    let second = poll_each(&app, &ids).await;
    assert_eq!(positions(&second), (2..=40).collect::<Vec<u64>>());
    let answered = app.metric(FROM_MEMORY).await - before;
    assert!(
        answered >= 30.0,
        "only {answered} of 39 polls were answered from memory"
    );

    // Two leave through this process: the one that left is LEFT at once; the others are never
    // too small (a memory answer may still count the leavers for one refresh), then exact.
    let (left_a, left_b) = (ids.remove(9), ids.remove(19));
    assert_eq!(app.leave("main", &left_a).await.as_u16(), 204);
    assert_eq!(app.leave("main", &left_b).await.as_u16(), 204);
    let gone = app.poll("main", &left_a).await;
    assert_eq!(gone.status, TicketState::Left, "{gone:?}");
    let truth: Vec<u64> = (2..=38).collect();
    let answers = positions(&poll_each(&app, &ids).await);
    assert_within(&answers, &truth, 2, "right after two leaves");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        positions(&poll_each(&app, &ids).await),
        truth,
        "after the leaves"
    );

    // Kept heard for twice the abandon time, mostly from memory: the ghost is skipped, nobody
    // polled is, and the positions close up behind the ghost.
    let before = app.metric(FROM_MEMORY).await;
    let end = std::time::Instant::now() + Duration::from_secs(8);
    while std::time::Instant::now() < end {
        poll_each(&app, &ids).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let answered = app.metric(FROM_MEMORY).await - before;
    assert!(answered > 200.0, "only {answered} polls from memory");
    let (_, room) = app.get_json(&vestibule_shared::paths::room("main")).await;
    assert_eq!(room["waiting"], 37, "only the ghost was skipped: {room}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let statuses = poll_each(&app, &ids).await;
    assert!(statuses
        .iter()
        .all(|s| s.status == TicketState::Waiting && !s.place_kept));
    let truth: Vec<u64> = (1..=37).collect();
    assert_eq!(positions(&statuses), truth, "without the skipped ghost");

    // The ghost comes back (its place is the head): everyone behind is one further back at
    // once, never one too small; exact after a few refreshes.
    let back = app.poll("main", &ghost).await;
    assert!(back.place_kept && back.position == Some(1), "{back:?}");
    let truth: Vec<u64> = (2..=38).collect();
    let answers = positions(&poll_each(&app, &ids).await);
    assert_within(&answers, &truth, 1, "right after the return");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        positions(&poll_each(&app, &ids).await),
        truth,
        "after the return"
    );

    // Admissions: 3 admitted from the head (the ghost first); the answers behind never too small.
    app.patch_room("main", json!({"paused": false, "admissionRatePerSec": 3}))
        .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    app.patch_room("main", json!({"paused": true})).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let statuses = poll_each(&app, &ids).await;
    let waiting: Vec<u64> = statuses.iter().filter_map(|s| s.position).collect();
    assert!(
        waiting.len() < ids.len(),
        "somebody was admitted: {statuses:?}"
    );
    assert_eq!(
        waiting,
        (1..=waiting.len() as u64).collect::<Vec<u64>>(),
        "the ones still waiting are at exact places"
    );
}
