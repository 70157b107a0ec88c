//! Presence, the same on every store (docs/DESIGN.md "Presence"): silent tickets are skipped by
//! the admission tick, positions and SSE cursors move exactly, a returning ticket is back at its
//! arrival sequence with `place_kept`, a hold that ran out is `EXPIRED`; the durable store keeps
//! skips and returns across a restart. Times are explicit (the stores take them as arguments).

mod support;
use support::JoinLine;

use support::room_id;

use std::sync::Arc;

use vestibule_shared::TicketState;
use vestibule_store::durable::{DurableOptions, DurableStore};
use vestibule_store::ids::{entry_token, random_id};
use vestibule_store::memory::MemoryStore;
use vestibule_store::redis::RedisStore;
use vestibule_store::{now_ms, AdmitRequest, Catalog, Queue, Settings, Store};
use vestibule_tests::RedisServer;

const ROOM: &str = "main";
const ABANDON_MS: u64 = 5_000;
const HOLD_MS: u64 = 60_000;

fn defaults() -> Settings {
    Settings {
        abandon_after_ms: ABANDON_MS,
        hold_place_ms: HOLD_MS,
        ..support::defaults()
    }
}

/// One leader tick at `at` with `count` tokens; returns (admitted, skipped).
async fn tick(store: &dyn Store, at: u64, count: usize) -> (u64, u64) {
    let epoch = store
        .lease(room_id(ROOM), "leader")
        .await
        .unwrap()
        .epoch
        .expect("the only holder leads");
    let tokens: Vec<String> = (0..count).map(|_| entry_token(ROOM)).collect();
    let request = AdmitRequest {
        holder: "leader",
        epoch,
        now_ms: at,
        token_ttl_ms: 60_000,
        max_active_users: None,
        tokens: &tokens,
        abandon_after_ms: ABANDON_MS,
        hold_place_ms: HOLD_MS,
        instant_bank_max: 0,
        pace: None,
    };
    let outcome = store.admit(room_id(ROOM), &request).await.unwrap();
    assert!(!outcome.fenced);
    (outcome.admitted, outcome.skipped)
}

/// Positions (`None` = not waiting) and `place_kept` of `ids`, each heard from at `at`.
async fn heard(store: &dyn Store, ids: &[String], at: u64) -> Vec<(Option<u64>, bool)> {
    let records = store.hear(room_id(ROOM), ids, at, true).await.unwrap();
    records
        .into_iter()
        .map(|r| r.map_or((None, false), |r| (r.position, r.place_kept)))
        .collect()
}

#[tokio::test]
async fn silent_tickets_are_skipped_and_come_back_to_their_place_on_every_store() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let stores: Vec<Arc<dyn Store>> = vec![
        Arc::new(MemoryStore::new()),
        Arc::new(DurableStore::open(dir.path(), DurableOptions::default()).unwrap()),
        Arc::new(
            RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2))
                .await
                .unwrap(),
        ),
    ];
    for store in stores {
        let kind = store.kind();
        store.seed_room(ROOM, &defaults()).await.unwrap();
        let t0 = now_ms();
        let mut ids = Vec::new();
        for _ in 0..5 {
            ids.push(
                store
                    .join_line(room_id(ROOM), None, &random_id())
                    .await
                    .unwrap()
                    .ticket
                    .id,
            );
        }
        let cursor = store
            .sse_refresh(room_id(ROOM), None, &[], t0)
            .await
            .unwrap()
            .cursor;
        // 2nd and 4th heard from 8 s later; at 10 s the other three have been silent > 5 s.
        let alive = [ids[1].clone(), ids[3].clone()];
        assert_eq!(
            heard(store.as_ref(), &alive, t0 + 8_000).await,
            [(Some(2), false), (Some(4), false)]
        );
        assert_eq!(tick(store.as_ref(), t0 + 10_500, 0).await, (0, 3), "{kind}");
        assert_eq!(
            store
                .counts(room_id(ROOM), t0 + 10_500)
                .await
                .unwrap()
                .waiting,
            2,
            "{kind}"
        );
        assert_eq!(
            heard(store.as_ref(), &alive, t0 + 10_500).await,
            [(Some(1), false), (Some(2), false)],
            "{kind}"
        );
        let delta = store
            .sse_refresh(room_id(ROOM), Some(cursor), &[], t0)
            .await
            .unwrap();
        let moved = delta.delta.expect("the cursor is followed");
        assert_eq!(
            moved.left_seqs.len(),
            3,
            "{kind}: skips move streams like leaves"
        );

        // The 3rd comes back: between the 2nd and the 4th again, its place kept.
        let back = heard(store.as_ref(), &[ids[2].clone()], t0 + 11_000).await;
        assert_eq!(back, [(Some(2), true)], "{kind}");
        assert_eq!(
            heard(store.as_ref(), &alive, t0 + 11_000).await,
            [(Some(1), false), (Some(3), false)],
            "{kind}"
        );
        let later = store
            .sse_refresh(room_id(ROOM), Some(delta.cursor), &[], t0)
            .await
            .unwrap();
        assert_eq!(
            later.delta.expect("followed").returned_seqs.len(),
            1,
            "{kind}"
        );

        // Admission takes the three heard from, in arrival order; nobody silent.
        assert_eq!(tick(store.as_ref(), t0 + 12_000, 5).await, (3, 0), "{kind}");
        // Read without being heard (an SSE hub's exact read): no return.
        let read = store
            .sse_refresh(room_id(ROOM), None, &ids, t0 + 12_000)
            .await
            .unwrap();
        let ended: Vec<_> = read
            .tickets
            .into_iter()
            .map(|r| r.map(|(record, _)| record))
            .collect();
        let states: Vec<TicketState> = ended.iter().map(|r| r.as_ref().unwrap().state).collect();
        use TicketState::{TokenIssued as Issued, Waiting};
        assert_eq!(
            states,
            [Waiting, Issued, Issued, Issued, Waiting],
            "{kind}: held ones wait without a place"
        );
        assert!(ended[0].as_ref().unwrap().position.is_none());

        // The 1st comes back within its hold: at the head, admitted at the next tick.
        assert_eq!(
            heard(store.as_ref(), &[ids[0].clone()], t0 + 13_000).await,
            [(Some(1), true)]
        );
        assert_eq!(tick(store.as_ref(), t0 + 13_100, 1).await, (1, 0), "{kind}");
        // The 5th never comes back within its hold: EXPIRED.
        tick(store.as_ref(), t0 + 10_500 + HOLD_MS + 1, 0).await;
        let gone = store
            .hear(
                room_id(ROOM),
                &[ids[4].clone()],
                t0 + 10_500 + HOLD_MS + 2,
                true,
            )
            .await
            .unwrap();
        assert_eq!(
            gone[0].as_ref().unwrap().state,
            TicketState::Expired,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn the_durable_store_keeps_skips_and_returns_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = now_ms();
    let mut ids = Vec::new();
    {
        let store = DurableStore::open(dir.path(), DurableOptions::default()).unwrap();
        store.seed_room(ROOM, &defaults()).await.unwrap();
        for _ in 0..4 {
            ids.push(
                store
                    .join_line(room_id(ROOM), None, &random_id())
                    .await
                    .unwrap()
                    .ticket
                    .id,
            );
        }
        heard(&store, &[ids[3].clone()], t0 + 8_000).await;
        assert_eq!(tick(&store, t0 + 10_500, 0).await, (0, 3));
        assert_eq!(
            heard(&store, &[ids[1].clone()], t0 + 11_000).await,
            [(Some(1), true)]
        );
    }
    let store = DurableStore::open(dir.path(), DurableOptions::default()).unwrap();
    assert_eq!(
        store
            .counts(room_id(ROOM), t0 + 11_000)
            .await
            .unwrap()
            .waiting,
        2
    );
    let read = heard(&store, &[ids[1].clone(), ids[3].clone()], t0 + 11_500).await;
    assert_eq!(
        read,
        [(Some(1), true), (Some(2), false)],
        "the return was kept"
    );
    let back = heard(&store, &[ids[0].clone()], t0 + 11_500).await;
    assert_eq!(
        back,
        [(Some(1), true)],
        "a held ticket heard after the restart comes back"
    );
}

/// Joins nobody heard the answer of (docs/DESIGN.md "Joins nobody heard the answer of"): parked,
/// they take no slot and no place; one heard from (a keyed retry, a poll) comes back to its own
/// place; one heard from before the park, or admitted, is left as it is.
#[tokio::test]
async fn unconfirmed_joins_are_parked_until_heard_from_on_every_store() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let stores: Vec<Arc<dyn Store>> = vec![
        Arc::new(MemoryStore::new()),
        Arc::new(DurableStore::open(dir.path(), DurableOptions::default()).unwrap()),
        Arc::new(
            RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2))
                .await
                .unwrap(),
        ),
    ];
    for store in stores {
        let kind = store.kind();
        store.seed_room(ROOM, &defaults()).await.unwrap();
        // The joins within one second (the Redis store keeps join times in seconds).
        while now_ms() % 1000 > 500 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let t0 = now_ms();
        let mut ids = Vec::new();
        for key in [None, None, None, Some("retried")] {
            let outcome = store
                .join_line(room_id(ROOM), key, &random_id())
                .await
                .unwrap();
            ids.push(outcome.ticket.id);
        }
        assert_eq!(
            now_ms() / 1000,
            t0 / 1000,
            "{kind}: the joins took too long"
        );
        // The 1st was heard from since its join (its shopper knows it): not parked.
        heard(store.as_ref(), &[ids[0].clone()], t0 + 2_000).await;
        let asked = [ids[0].clone(), ids[1].clone(), ids[3].clone(), random_id()];
        let parked = store
            .park_unconfirmed(room_id(ROOM), &asked, t0, HOLD_MS, t0 + 2_500)
            .await
            .unwrap();
        assert_eq!(parked, [ids[1].clone(), ids[3].clone()], "{kind}");
        // Again: nothing more.
        let again = store
            .park_unconfirmed(room_id(ROOM), &asked, t0, HOLD_MS, t0 + 2_600)
            .await
            .unwrap();
        assert!(again.is_empty(), "{kind}: {again:?}");
        // They hold no place: the 3rd is 2nd, and two wait.
        assert_eq!(
            heard(store.as_ref(), &[ids[2].clone()], t0 + 3_000).await,
            [(Some(2), false)],
            "{kind}"
        );
        let counts = store.counts(room_id(ROOM), t0 + 3_000).await.unwrap();
        assert_eq!(counts.waiting, 2, "{kind}");
        // And no slot: a tick with room for five admits the two really there.
        assert_eq!(tick(store.as_ref(), t0 + 3_100, 5).await, (2, 0), "{kind}");
        let counts = store.counts(room_id(ROOM), t0 + 3_100).await.unwrap();
        assert_eq!((counts.waiting, counts.active), (0, 2), "{kind}");
        // An admitted ticket is not parked.
        let admitted = store
            .park_unconfirmed(room_id(ROOM), &ids[..1], t0, HOLD_MS, t0 + 3_200)
            .await
            .unwrap();
        assert!(admitted.is_empty(), "{kind}");

        // The keyed join retried: it finds its ticket, still waiting without a place, and its
        // answer hears it (as the join route does): back at its own place, ahead of later joins.
        let later = store
            .join_line(room_id(ROOM), None, &random_id())
            .await
            .unwrap()
            .ticket
            .id;
        let found = store
            .join_line(room_id(ROOM), Some("retried"), &random_id())
            .await
            .unwrap();
        assert!(!found.created, "{kind}");
        assert_eq!(found.ticket.id, ids[3], "{kind}");
        assert_eq!(found.ticket.state, TicketState::Waiting, "{kind}");
        assert_eq!(
            heard(store.as_ref(), &[ids[3].clone(), later.clone()], t0 + 4_000).await,
            [(Some(1), true), (Some(2), false)],
            "{kind}"
        );
        assert_eq!(tick(store.as_ref(), t0 + 4_100, 1).await, (1, 0), "{kind}");
        let read = store
            .ticket(room_id(ROOM), &ids[3], t0 + 4_100)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read.state, TicketState::TokenIssued, "{kind}");
        // The one never heard from expires with its hold.
        tick(store.as_ref(), t0 + 2_500 + HOLD_MS + 1, 0).await;
        let gone = store
            .ticket(room_id(ROOM), &ids[1], t0 + 2_500 + HOLD_MS + 2)
            .await
            .unwrap();
        assert_eq!(gone.unwrap().state, TicketState::Expired, "{kind}");
    }
}
