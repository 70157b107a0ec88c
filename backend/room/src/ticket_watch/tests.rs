use std::time::{Duration, Instant};

use vestibule_shared::{RoomState, TicketState, TicketStatus};
use vestibule_store::{now_ms, RoomId, Settings, TicketRecord};

use super::move_log::{MoveLog, Polled};
use super::streams::publish;
use super::{PollRules, SseHub};

fn status(position: u64) -> TicketStatus {
    TicketStatus {
        ticket_id: "t".into(),
        room: "main".into(),
        status: TicketState::Waiting,
        position: Some(position),
        eta_seconds: None,
        eta_seconds_high: None,
        reason: None,
        eta_basis: None,
        next_poll_after_ms: 1000,
        entry_token: None,
        token_expires_at: None,
        checkout_url: None,
        room_state: RoomState::Open,
        place_kept: false,
        heartbeat_after_ms: None,
        sold_out_message: None,
        opens_at: None,
        ticket_tag: None,
        message_en: None,
        message_ko: None,
        beyond_stock: false,
        queueing_method: None,
        display_name_en: None,
        display_name_ko: None,
    }
}

#[test]
fn streams_of_one_ticket_share_one_channel_and_only_changes_are_sent() {
    let hub = SseHub::default();
    let mut a = hub.subscribe("t", status(5));
    let b = hub.subscribe("t", status(5));
    assert_eq!(hub.lock().by_ticket.len(), 1);
    let watchers = hub.lock();
    let watched = &watchers.by_ticket["t"];
    publish(watched, || status(5));
    assert!(!a.has_changed().unwrap(), "an unchanged status is not sent");
    publish(watched, || status(4));
    assert!(a.has_changed().unwrap());
    assert_eq!(a.borrow_and_update().position, Some(4));
    assert_eq!(b.borrow().position, Some(4));
}

#[test]
fn closed_streams_are_forgotten_and_new_ones_are_due_a_read() {
    let hub = SseHub::default();
    let receiver = hub.subscribe("t", status(5));
    let (_, due) = hub.prepare(Instant::now());
    assert_eq!(due, ["t"]);
    assert_eq!(hub.stream_count(), 1);
    drop(receiver);
    let (_, due) = hub.prepare(Instant::now());
    assert!(due.is_empty());
    assert_eq!(hub.stream_count(), 0);
}

/// A random room's cursor is never followed, so every stream is due at every refresh: the
/// longest due are read first, and 5,000 streams are all read within three refreshes of
/// 2,000 (none starved by the map's order).
#[tokio::test]
async fn in_a_random_room_every_stream_is_read_in_turn() {
    use vestibule_store::memory::MemoryStore;
    use vestibule_store::{
        Catalog, Draw, JoinRequest, Queue, QueueingMethod, Settings, SettingsPatch,
    };
    let store = MemoryStore::new();
    let settings: Settings = serde_json::from_value(serde_json::json!({
        "admissionRatePerSec": 0.0, "paused": true, "tokenTtlMs": 60000
    }))
    .unwrap();
    let room = RoomId::new(
        "main",
        store.seed_room("main", &settings).await.unwrap().generation,
    );
    store.draw_seed(room, &"07".repeat(32)).await.unwrap();
    let patch = SettingsPatch {
        queueing_method: Some(QueueingMethod::Random),
        ..SettingsPatch::default()
    };
    let base = store.room_settings("main").await.unwrap();
    store.update_room(room, &base, &patch, None).await.unwrap();
    let hub = SseHub::default();
    let mut receivers = Vec::new();
    for i in 0..5_000 {
        let id = format!("ticket-{i}");
        store.join(room, &JoinRequest::new(&id)).await.unwrap();
        receivers.push(hub.subscribe(&id, status(0)));
    }
    let settings = store.room_settings("main").await.unwrap().settings;
    let status_of = |record: &TicketRecord| status(record.position.unwrap_or(0));
    for _ in 0..3 {
        hub.refresh(&store, room, settings.clone(), &status_of)
            .await
            .unwrap();
    }
    let unread = receivers
        .iter()
        .filter(|receiver| receiver.borrow().position == Some(0))
        .count();
    assert_eq!(unread, 0, "every stream was read within three refreshes");
}

fn delta(popped: u64, left: &[u64], back: &[u64]) -> vestibule_store::QueueDelta {
    vestibule_store::QueueDelta {
        popped,
        left_seqs: left.to_vec(),
        returned_seqs: back.to_vec(),
    }
}

fn polled_at(seq: u64, position: u64, log: &MoveLog) -> Polled {
    Polled {
        seq,
        position: Some(position),
        mark: log.mark,
        popped_at: log.popped,
        polled_until: Instant::now() + Duration::from_secs(60),
        heard_at: Instant::now(),
        hear_pending: false,
        queued: false,
        place_kept: false,
    }
}

/// A polled ticket caught up from the log moves as a streamed one moved by each refresh:
/// − admitted − leavers ahead + returns ahead, summed; one that left, came back or may have
/// been admitted on the way (even if returns since would put it behind the head again), or
/// whose mark the log no longer reaches, is not followed any more.
#[test]
fn polled_tickets_are_caught_up_from_the_log_of_changes() {
    let keep = Duration::from_secs(60);
    let now = Instant::now();
    let mut log = MoveLog::default();
    log.push(&delta(1, &[], &[]), now, keep);
    // seq 50 at position 20, seq 10 at 2, seq 30 at 8 (all as of this mark).
    let mut far = polled_at(50, 20, &log);
    let mut near = polled_at(10, 2, &log);
    let mut leaver = polled_at(30, 8, &log);
    log.push(&delta(2, &[20, 30, 60], &[]), now, keep);
    log.push(&delta(0, &[], &[5, 7, 8, 40]), now, keep);
    log.push(&delta(1, &[], &[]), now, keep);
    // far: 20 − 3 (admitted) − 2 (leavers 20, 30 ahead) + 4 (returns ahead) = 19.
    assert!(far.catch_up(&log));
    assert_eq!(far.position, Some(19));
    assert_eq!((far.mark, far.popped_at), (log.mark, log.popped));
    // near: 2 admitted after its mark reached it; the 3 returns ahead do not bring it back.
    assert!(!near.catch_up(&log));
    // leaver: seq 30 left.
    assert!(!leaver.catch_up(&log));
    // Caught up again: nothing new, nothing moves; then one more admission.
    assert!(far.catch_up(&log));
    assert_eq!(far.position, Some(19));
    log.push(&delta(3, &[], &[]), now, keep);
    assert!(far.catch_up(&log));
    assert_eq!(far.position, Some(16));
    // The log forgets changes older than `keep`: a mark before them is not caught up.
    let mut old = polled_at(90, 50, &log);
    log.push(&delta(0, &[70], &[]), now, keep);
    log.push(&delta(0, &[71], &[]), now + keep * 2, keep);
    assert_eq!(log.moves.len(), 1);
    assert!(!old.catch_up(&log));
    // A lost cursor cuts the log: no mark before it is caught up.
    let mut cut = polled_at(90, 50, &log);
    log.cut();
    assert!(!cut.catch_up(&log));
    // One awaiting an exact read has nothing to catch up.
    let mut awaiting = polled_at(90, 50, &log);
    awaiting.position = None;
    awaiting.mark = 0;
    assert!(awaiting.catch_up(&log));
}

/// Polled tickets a failed refresh was to read go back on the due queue, first and once;
/// one answered or queued since is left alone.
#[test]
fn a_failed_read_puts_polled_tickets_back_on_the_due_queue() {
    let hub = SseHub::default();
    let log = MoveLog::default();
    {
        let mut watchers = hub.lock();
        for id in ["a", "b", "c"] {
            let mut entry = polled_at(10, 5, &log);
            entry.position = None;
            watchers.polled.insert(id.to_owned(), entry);
        }
        watchers.polled.get_mut("c").unwrap().position = Some(5);
        watchers.polled.get_mut("b").unwrap().queued = true;
        watchers.polled_due.push_back("b".to_owned());
    }
    let due = ["a".to_owned(), "c".to_owned(), "gone".to_owned()];
    hub.requeue(&due);
    hub.requeue(&due);
    let watchers = hub.lock();
    assert_eq!(watchers.polled_due, ["a", "b"]);
    assert!(watchers.polled["a"].queued);
    assert!(!watchers.polled["c"].queued);
}

fn rules(refresh_ms: u64) -> PollRules {
    PollRules {
        refresh: Duration::from_millis(refresh_ms),
        abandon: Duration::from_secs(300),
        rate_per_sec: 1.0,
        lease: Duration::from_secs(60),
    }
}

/// A poll read from the store anchors its ticket at the hub's cursor; the next polls are
/// answered from memory (followed by the cursor), except near the head, when the hub's last
/// refresh is too old, and with a return heard since counted for those behind it.
#[tokio::test]
async fn polled_tickets_are_answered_from_memory_by_the_rules() {
    use vestibule_store::memory::MemoryStore;
    use vestibule_store::{Catalog, JoinRequest, Presence, Queue};
    let store = MemoryStore::new();
    let settings: Settings = serde_json::from_value(serde_json::json!({
        "admissionRatePerSec": 1.0, "paused": true, "tokenTtlMs": 60000
    }))
    .unwrap();
    let room = RoomId::new(
        "main",
        store.seed_room("main", &settings).await.unwrap().generation,
    );
    let hub = SseHub::default();
    let status_of = |record: &TicketRecord| status(record.position.unwrap_or(0));
    let ids: Vec<String> = (0..10).map(|i| format!("ticket-{i}")).collect();
    for id in &ids {
        store.join(room, &JoinRequest::new(id)).await.unwrap();
    }
    let poll = |id: String| {
        let (hub, store) = (&hub, &store);
        async move {
            let sent = Instant::now();
            let (record, anchor) = store
                .hear_polled(room, &id, now_ms())
                .await
                .unwrap()
                .unwrap();
            hub.note_poll(&id, &record, anchor, sent, &rules(100));
            record.position
        }
    };
    assert_eq!(
        hub.answer_poll(&ids[5], &rules(100)),
        None,
        "never refreshed"
    );
    assert_eq!(poll(ids[5].clone()).await, Some(6));
    // No cursor yet: read exactly at the first refresh.
    hub.refresh(&store, room, settings.clone(), &status_of)
        .await
        .unwrap();
    let answer = hub.answer_poll(&ids[5], &rules(100)).expect("followed");
    assert_eq!(answer.position, 6);
    // At the hub's cursor now: anchored by the poll itself.
    assert_eq!(poll(ids[8].clone()).await, Some(9));
    assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 9);
    // Near the head (within ⌈rate × (age + 1 s)⌉ + 1 = 3): the store answers.
    assert_eq!(poll(ids[1].clone()).await, Some(2));
    assert_eq!(hub.answer_poll(&ids[1], &rules(100)), None);
    // A return heard here ahead of ticket 8 (seq 5) and one unknown: 8 sees both, 5 one.
    let seq_of = |id: &str| {
        store
            .with_room(room, |room| room.poll_anchor(id))
            .unwrap()
            .unwrap()
            .seq
    };
    hub.lock()
        .returns
        .push((Instant::now(), Some(seq_of(&ids[6]))));
    // A call hearing a ticket the hub does not follow, dropped unanswered, while nobody
    // ever left: nobody can be held, so no return; a return of unknown place is counted.
    drop(hub.hearing(&["unknown".to_owned()]));
    assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 10);
    hub.lock().returns.push((Instant::now(), None));
    assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 11);
    assert_eq!(hub.answer_poll(&ids[5], &rules(100)).unwrap().position, 7);
    // A refresh sent after them has read them (none happened): they no longer count.
    hub.refresh(&store, room, settings.clone(), &status_of)
        .await
        .unwrap();
    assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 9);
    // Answers were queued once each for the batch of "heard from".
    let heard = hub.take_heard();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(hub.take_heard().is_empty());
    // A leave moves the answers at the next refresh, and the one that left is forgotten.
    store.leave(room, &ids[2], now_ms()).await.unwrap();
    hub.forget(&ids[2]);
    hub.refresh(&store, room, settings.clone(), &status_of)
        .await
        .unwrap();
    assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 8);
    assert_eq!(hub.answer_poll(&ids[5], &rules(100)).unwrap().position, 5);
    // A call hearing a ticket the hub does not follow (it may be a skipped one coming back),
    // in flight: counted in every answer until it answers; not kept, it no longer counts.
    let answer = |id: &str| hub.answer_poll(id, &rules(100)).unwrap().position;
    let hearing = hub.hearing(&["a-skipped-one".to_owned()]);
    assert_eq!(answer(&ids[8]), 9);
    hearing.answered([]);
    assert_eq!(answer(&ids[8]), 8);
    // One the hub follows is not counted, until a refresh sees it leave (skipped) while the
    // call is in flight; unanswered (a dropped request), it counts until the next refresh.
    let hearing = hub.hearing(&[ids[5].clone()]);
    assert_eq!(answer(&ids[8]), 8);
    store.leave(room, &ids[5], now_ms()).await.unwrap();
    hub.refresh(&store, room, settings.clone(), &status_of)
        .await
        .unwrap();
    assert_eq!(
        answer(&ids[8]),
        8,
        "7 behind the leaver, + 1 for the call in flight"
    );
    drop(hearing);
    assert_eq!(answer(&ids[8]), 8);
    hub.refresh(&store, room, settings.clone(), &status_of)
        .await
        .unwrap();
    assert_eq!(answer(&ids[8]), 7);
    // The hub's last refresh older than 3 refresh periods: the store answers.
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(hub.answer_poll(&ids[8], &rules(1)), None);
    // Nobody streams these: the watched ids for stream presence are none.
    assert!(hub.watched_ids().is_empty());
}
