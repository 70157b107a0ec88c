//! The scheduled opening and its draw, the same on every store (docs/DESIGN.md "Scheduled opening
//! and the draw"): the seed is written once (the first caller's wins), pre-queue joins are
//! idempotent `PRE_QUEUE` tickets without a position, nobody is admitted before the draw, the
//! draw is fenced, exactly once and all at once — a permutation of places 1..N by HMAC of the
//! seed, recomputed by `verify-draw` — and arrivals after the opening stay behind the drawn.

#[path = "../store/tests/support/mod.rs"]
mod support;
use support::JoinLine;

use support::room_id;

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::future::join_all;
use vestibule::verify_draw::verify;
use vestibule_shared::draw::{DrawInfo, DrawState};
use vestibule_shared::TicketState;
use vestibule_store::draw::{
    draw_order, fresh_seed, mixed_seed, seed_bytes, seed_commitment, tags_sha256,
};
use vestibule_store::durable::{DurableOptions, DurableStore};
use vestibule_store::ids::{entry_token, log_tag, random_id};
use vestibule_store::memory::MemoryStore;
use vestibule_store::redis::RedisStore;
use vestibule_store::{
    now_ms, AdmitRequest, Draw, DrawOutcome, DrawRequest, JoinKind, JoinOutcome, JoinRequest,
    Settings, SettingsPatch, Store, StoreOptions, TicketRecord,
};
use vestibule_tests::RedisServer;

const ROOM: &str = "main";
const PRE_QUEUE: usize = 10_000;

fn defaults() -> Settings {
    Settings {
        abandon_after_ms: 300_000,
        hold_place_ms: 0,
        ..support::defaults()
    }
}

async fn lead(store: &dyn Store, holder: &str) -> Option<u64> {
    store.lease(room_id(ROOM), holder).await.unwrap().epoch
}

/// A pre-queue join (as the page makes in the pre-queue window) that must be let in.
async fn prequeue(store: &dyn Store, key: Option<&str>) -> JoinOutcome {
    let id = random_id();
    let request = JoinRequest::new(&id)
        .keyed(key)
        .of_kind(JoinKind::PreQueue {
            settings_version: None,
        });
    let reply = store.join(room_id(ROOM), &request).await.unwrap();
    reply
        .joined()
        .expect("a pre-queue join without limit is let in")
}

async fn admit(store: &dyn Store, holder: &str, epoch: u64, count: usize) -> u64 {
    let tokens: Vec<String> = (0..count).map(|_| entry_token(ROOM)).collect();
    let outcome = store
        .admit(
            room_id(ROOM),
            &AdmitRequest {
                holder,
                epoch,
                now_ms: now_ms(),
                token_ttl_ms: 60_000,
                max_active_users: None,
                tokens: &tokens,
                abandon_after_ms: 300_000,
                hold_place_ms: 0,
                instant_bank_max: 0,
                pace: None,
            },
        )
        .await
        .unwrap();
    assert!(!outcome.fenced, "{}: the leader was fenced", store.kind());
    outcome.admitted
}

async fn read_all(store: &dyn Store, ids: &[String]) -> Vec<TicketRecord> {
    let mut records = Vec::new();
    for chunk in ids.chunks(1_000) {
        let answer = store
            .sse_refresh(room_id(ROOM), None, chunk, now_ms())
            .await
            .unwrap();
        records.extend(answer.tickets.into_iter().map(|r| r.expect("known").0));
    }
    records
}

/// Every store's whole draw: one check per step, named by the store's kind.
/// `ids` in the order the draw gives them (issue 42): by the committed seed mixed with the hash
/// of their tags.
fn mixed_order(seed_hex: &str, ids: Vec<String>) -> Vec<String> {
    let tags: Vec<String> = ids.iter().map(|id| log_tag(id)).collect();
    let mixed = mixed_seed(&seed_bytes(seed_hex).unwrap(), &tags_sha256(&tags), None).unwrap();
    draw_order(&mixed, ids, |id| log_tag(id))
}

async fn the_draw_on(store: &dyn Store, other_replica: Option<&dyn Store>) {
    let kind = store.kind();
    store.seed_room(ROOM, &defaults()).await.unwrap();
    let at = now_ms();
    let patch = SettingsPatch {
        opens_at_ms: Some(Some(at + 60_000)),
        prequeue_opens_at_ms: Some(Some(at)),
        ..SettingsPatch::default()
    };
    support::change(store, ROOM, &patch, None).await.unwrap();
    let stored = store.room_settings(ROOM).await.unwrap().settings;
    assert_eq!(stored.opens_at_ms, Some(at + 60_000), "{kind}");
    assert_eq!(stored.prequeue_opens_at_ms, Some(at), "{kind}");

    // The first seed wins; a second replica's fresh seed is not written.
    assert!(
        store.draw_record(room_id(ROOM)).await.unwrap().is_none(),
        "{kind}"
    );
    let first = fresh_seed();
    let record = store.draw_seed(room_id(ROOM), &first).await.unwrap();
    let again = other_replica
        .unwrap_or(store)
        .draw_seed(room_id(ROOM), &fresh_seed())
        .await
        .unwrap();
    assert_eq!(
        (record.seed.as_str(), again.seed.as_str()),
        (first.as_str(), first.as_str()),
        "{kind}"
    );
    let commitment = seed_commitment(&seed_bytes(&first).unwrap());

    // One shopper waited before the pre-queue existed: ahead of everyone, not drawn (what
    // Cloudflare's pre-queue leaves to the operator: cloudflare/cloudflare-docs#8773 notes that
    // users already active are not pre-queued).
    let early = store
        .join_line(room_id(ROOM), None, &random_id())
        .await
        .unwrap()
        .ticket
        .id;
    let ids: Vec<String> = join_all((0..=PRE_QUEUE).map(|i| async move {
        let key = format!("k:{i}");
        let outcome = prequeue(store, Some(&key)).await;
        assert!(outcome.created);
        outcome.ticket.id
    }))
    .await;
    // Idempotent: the same key finds its PRE_QUEUE ticket, without a position.
    let retry = prequeue(store, Some("k:7")).await;
    assert_eq!(
        (retry.created, &retry.ticket.id),
        (false, &ids[7]),
        "{kind}"
    );
    assert_eq!(retry.ticket.state, TicketState::PreQueue, "{kind}");
    assert_eq!(retry.ticket.position, None, "{kind}");
    let polled = store
        .ticket(room_id(ROOM), &ids[3], now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (polled.state, polled.position),
        (TicketState::PreQueue, None),
        "{kind}"
    );
    let heard = store
        .hear(room_id(ROOM), &ids[3..4], now_ms(), true)
        .await
        .unwrap();
    assert_eq!(
        heard[0].as_ref().unwrap().state,
        TicketState::PreQueue,
        "{kind}"
    );
    // One leaves the pre-queue: PRE_QUEUE tickets are left like waiting ones.
    let gone = ids[PRE_QUEUE].clone();
    store.leave(room_id(ROOM), &gone, now_ms()).await.unwrap();
    let ids = &ids[..PRE_QUEUE];

    // Nobody is admitted while the pre-queue waits for its draw.
    let epoch = lead(store, "leader").await.expect("free lease");
    assert_eq!(admit(store, "leader", epoch, 5).await, 0, "{kind}");
    // An arrival after the opening (before the draw) is behind all of the pre-queue.
    let late = store
        .join_line(room_id(ROOM), None, &random_id())
        .await
        .unwrap()
        .ticket;
    assert_eq!(late.position, Some(PRE_QUEUE as u64 + 2), "{kind}");

    let mut pre = store.prequeue_ids(room_id(ROOM)).await.unwrap();
    pre.sort();
    let mut expected: Vec<String> = ids.to_vec();
    expected.sort();
    assert_eq!(
        pre, expected,
        "{kind}: the pre-queue is every pre-queue join but the leaver"
    );
    let ordered = mixed_order(&first, ids.to_vec());
    let tags: Vec<String> = ordered.iter().map(|id| log_tag(id)).collect();
    // A stale epoch is refused and changes nothing.
    let stale = DrawRequest {
        holder: "leader",
        epoch: epoch + 1,
        now_ms: now_ms(),
        places_per_step: 3_000,
    };
    assert_eq!(
        store.draw(room_id(ROOM), &stale).await.unwrap(),
        DrawOutcome::Fenced,
        "{kind}"
    );

    let started = std::time::Instant::now();
    let good = DrawRequest {
        epoch,
        ..stale.clone()
    };
    // Redis draws in steps of `places_per_step`; until the last, shoppers see nothing of it.
    let mut steps = 0;
    let count = loop {
        steps += 1;
        match store.draw(room_id(ROOM), &good).await.unwrap() {
            DrawOutcome::Drawn { count } => break count,
            DrawOutcome::Placed { placed } => {
                assert_eq!(placed, 3_000 * steps, "{kind}");
                let first = store
                    .ticket(room_id(ROOM), &ordered[0], now_ms())
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    (first.state, first.position),
                    (TicketState::PreQueue, None),
                    "{kind}: a placed ticket is PRE_QUEUE until the last step"
                );
                assert_eq!(admit(store, "leader", epoch, 5).await, 0, "{kind}");
                let record = store.draw_record(room_id(ROOM)).await.unwrap().unwrap();
                assert_eq!(
                    (record.drawn_at_ms, record.count),
                    (None, 0),
                    "{kind}: GET …/draw publishes nothing before the last step"
                );
            }
            other => panic!("{kind}: {other:?}"),
        }
    };
    assert_eq!(count, PRE_QUEUE as u64, "{kind}");
    if kind == "redis" {
        assert_eq!(steps, 4, "{kind}: 10,000 places in steps of 3,000");
    }
    eprintln!(
        "{kind}: the draw of {PRE_QUEUE} took {:?}",
        started.elapsed()
    );
    assert_eq!(
        store.draw(room_id(ROOM), &good).await.unwrap(),
        DrawOutcome::AlreadyDrawn,
        "{kind}"
    );
    if let Some(other) = other_replica {
        assert_eq!(
            other.draw(room_id(ROOM), &good).await.unwrap(),
            DrawOutcome::AlreadyDrawn,
            "{kind}"
        );
    }

    // A permutation: drawn place k (1-based) is queue position k + 1 (the early shopper is 1).
    let records = read_all(store, &ordered).await;
    let positions: Vec<u64> = records
        .iter()
        .map(|r| {
            assert_eq!(r.state, TicketState::Waiting, "{kind}");
            r.position.expect("a drawn ticket has a place")
        })
        .collect();
    assert_eq!(
        positions,
        (2..=PRE_QUEUE as u64 + 1).collect::<Vec<_>>(),
        "{kind}"
    );
    let unique: HashSet<u64> = positions.iter().copied().collect();
    assert_eq!(unique.len(), PRE_QUEUE, "{kind}");
    let early_now = store
        .ticket(room_id(ROOM), &early, now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(early_now.position, Some(1), "{kind}");
    let late_now = store
        .ticket(room_id(ROOM), &late.id, now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(late_now.position, Some(PRE_QUEUE as u64 + 2), "{kind}");

    // The published record recomputes with verify-draw, and its commitment is SHA-256(seed).
    let record = store.draw_record(room_id(ROOM)).await.unwrap().unwrap();
    assert_eq!(record.count, PRE_QUEUE as u64, "{kind}");
    assert!(record.drawn_at_ms.is_some(), "{kind}");
    let mut pages = Vec::new();
    let mut offset = 0;
    while offset < record.count {
        let page_tags = store.draw_tags(room_id(ROOM), offset, 3_000).await.unwrap();
        pages.push(DrawInfo {
            room: ROOM.into(),
            state: DrawState::Drawn,
            opens_at: None,
            prequeue_opens_at: None,
            seed_sha256: Some(commitment.clone()),
            seed: Some(record.seed.clone()),
            algorithm: vestibule_shared::draw::DRAW_ALGORITHM.into(),
            tags_sha256: record.tags_sha256.clone(),
            beacon: None,
            draw_seed: None,
            drawn_at: None,
            count: record.count,
            offset,
            tags: page_tags.clone(),
            next_offset: None,
        });
        offset += page_tags.len() as u64;
    }
    assert_eq!(
        pages
            .iter()
            .flat_map(|p| p.tags.clone())
            .collect::<Vec<_>>(),
        tags,
        "{kind}"
    );
    let verified = verify(&pages, Some(&tags[41])).expect("the published draw verifies");
    assert_eq!(verified.place, Some(42), "{kind}");
    assert_eq!(
        record.tags_sha256,
        Some(tags_sha256(&tags)),
        "{kind}: the mix recorded is the drawn tags' hash"
    );

    // Admission goes on in the drawn order: the early shopper, then places 1 and 2.
    assert_eq!(admit(store, "leader", epoch, 3).await, 3, "{kind}");
    for id in [&early, &ordered[0], &ordered[1]] {
        let record = store
            .ticket(room_id(ROOM), id, now_ms())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.state, TicketState::TokenIssued, "{kind}");
    }
    let third = store
        .ticket(room_id(ROOM), &ordered[2], now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third.position, Some(1), "{kind}");
    // A pre-queue join after the draw is an ordinary join at the back: behind the 9,998 drawn
    // still waiting and the late arrival.
    let after = prequeue(store, None).await;
    assert_eq!(after.ticket.state, TicketState::Waiting, "{kind}");
    assert_eq!(after.ticket.position, Some(PRE_QUEUE as u64), "{kind}");
}

#[tokio::test]
async fn the_draw_is_a_committed_permutation_made_once_on_the_embedded_stores() {
    the_draw_on(&MemoryStore::new().with_options(support::TESTING), None).await;
    let dir = tempfile::tempdir().unwrap();
    {
        let durable = DurableStore::open(dir.path(), DurableOptions::default()).unwrap();
        let durable = durable.with_options(support::TESTING);
        the_draw_on(&durable, None).await;
    }
    // The journal replays the pre-queue, the seed and the draw exactly.
    let reopened = DurableStore::open(dir.path(), DurableOptions::default()).unwrap();
    let record = reopened.draw_record(room_id(ROOM)).await.unwrap().unwrap();
    assert_eq!(record.count, PRE_QUEUE as u64);
    assert!(reopened
        .prequeue_ids(room_id(ROOM))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        reopened
            .draw_tags(room_id(ROOM), 0, 20_000)
            .await
            .unwrap()
            .len(),
        PRE_QUEUE
    );
}

#[tokio::test]
async fn the_draw_is_a_committed_permutation_made_once_on_redis_with_two_replicas() {
    let redis = RedisServer::start();
    let timeout = std::time::Duration::from_secs(5);
    let a = RedisStore::connect(&redis.url(), timeout).await.unwrap();
    let b = RedisStore::connect(&redis.url(), timeout).await.unwrap();
    let (a, b) = (
        a.with_options(support::TESTING),
        b.with_options(support::TESTING),
    );
    the_draw_on(&a, Some(&b)).await;
}

/// Two replicas race at the opening: the leader is "killed" mid-way (its lease lapses, it never
/// releases it), the other takes over and draws; the old leader's late draw is fenced; the
/// draw is made exactly once.
#[tokio::test]
async fn a_replica_killed_at_the_opening_neither_breaks_nor_repeats_the_draw() {
    let redis = RedisServer::start();
    let timeout = std::time::Duration::from_secs(5);
    // a's lease is short, so that it lapses when a dies; b's is long.
    let replica = |lease_ms| {
        let url = redis.url();
        async move {
            let store = RedisStore::connect(&url, timeout).await.unwrap();
            let options = StoreOptions {
                lease_ms,
                ..StoreOptions::default()
            };
            Arc::new(store.with_options(options)) as Arc<dyn Store>
        }
    };
    let (a, b) = (replica(300).await, replica(60_000).await);
    a.seed_room(ROOM, &defaults()).await.unwrap();
    let seed = a
        .draw_seed(room_id(ROOM), &fresh_seed())
        .await
        .unwrap()
        .seed;
    let ids: Vec<String> = join_all((0..500).map(|_| {
        let a = a.clone();
        async move { prequeue(&*a, None).await.ticket.id }
    }))
    .await;
    let order = mixed_order(&seed, ids);
    let tags: Vec<String> = order.iter().map(|id| log_tag(id)).collect();
    let epoch_a = lead(&*a, "a").await.expect("a leads");
    assert_eq!(lead(&*b, "b").await, None, "one leader at a time");
    // a makes the first step of the draw, then dies: its lease lapses; b takes over.
    let step = |holder: &'static str, epoch: u64| DrawRequest {
        holder,
        epoch,
        now_ms: now_ms(),
        places_per_step: 200,
    };
    assert_eq!(
        a.draw(room_id(ROOM), &step("a", epoch_a)).await.unwrap(),
        DrawOutcome::Placed { placed: 200 }
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let epoch_b = lead(&*b, "b").await.expect("b takes over");
    // a's late step is fenced; b goes on where a stopped, and ends the draw.
    let (late_a, next_b) = (step("a", epoch_a), step("b", epoch_b));
    let (ra, rb) = tokio::join!(
        a.draw(room_id(ROOM), &late_a),
        b.draw(room_id(ROOM), &next_b)
    );
    assert_eq!(ra.unwrap(), DrawOutcome::Fenced);
    assert_eq!(rb.unwrap(), DrawOutcome::Placed { placed: 400 });
    assert_eq!(
        b.draw(room_id(ROOM), &step("b", epoch_b)).await.unwrap(),
        DrawOutcome::Drawn { count: 500 }
    );
    // b restarts at the opening and tries again: nothing is drawn twice.
    let epoch_b2 = lead(&*b, "b").await.expect("b still leads");
    assert_eq!(
        b.draw(room_id(ROOM), &step("b", epoch_b2)).await.unwrap(),
        DrawOutcome::AlreadyDrawn
    );
    assert_eq!(b.draw_tags(room_id(ROOM), 0, 1_000).await.unwrap(), tags);
    let positions: Vec<u64> = read_all(&*a, &order)
        .await
        .iter()
        .map(|r| r.position.unwrap())
        .collect();
    assert_eq!(positions, (1..=500).collect::<Vec<_>>());
    // Every drawn ticket counts as heard from at the draw: its last-heard slot (u32 seconds at its
    // new seq, what admit.lua reads) is now, not 0 and not another ticket's.
    let raw = RedisStore::connect(&redis.url(), timeout).await.unwrap();
    let mut connection = raw.connection();
    let now_s = now_ms() / 1000;
    for id in &order {
        let seq: u64 = redis::cmd("ZSCORE")
            .arg(format!("vestibule:{{{ROOM}}}:g1:queue"))
            .arg(id)
            .query_async(&mut connection)
            .await
            .unwrap();
        let heard: Vec<u64> = redis::cmd("BITFIELD")
            .arg(format!("vestibule:{{{ROOM}}}:g1:seen:{}", seq / 65536))
            .arg("GET")
            .arg("u32")
            .arg(format!("#{}", seq % 65536))
            .query_async(&mut connection)
            .await
            .unwrap();
        assert!(now_s - heard[0] <= 5, "seq {seq} heard at {}", heard[0]);
    }
}
