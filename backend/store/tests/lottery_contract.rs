//! Random queueing (`queueingMethod: "random"`, docs/DESIGN.md "Random queueing"), the same on
//! every store: each waiting ticket holds the key HMAC-SHA256(seed, tag) (ties by tag, then id),
//! admission takes the smallest keys first whenever they arrived, a position is the rank by key,
//! leaves, skips and admissions keep the lottery consistent, and switching FIFO → random → FIFO
//! keeps every waiting ticket.

mod support;
use support::JoinLine;

use support::room_id;

use std::collections::{HashMap, HashSet};

use vestibule_shared::TicketState;
use vestibule_store::draw::{draw_key, fresh_seed, seed_bytes};
use vestibule_store::ids::{entry_token, random_id};
use vestibule_store::{
    now_ms, Admission, AdmitRequest, Catalog, Draw, Queue, QueueingMethod, Settings, SettingsPatch,
    Store, TicketRecord,
};

const ROOM: &str = "main";

fn defaults() -> Settings {
    Settings {
        token_ttl_ms: 600_000,
        abandon_after_ms: 300_000,
        hold_place_ms: 0,
        ..support::defaults()
    }
}

fn method(method: QueueingMethod) -> SettingsPatch {
    SettingsPatch {
        queueing_method: Some(method),
        ..SettingsPatch::default()
    }
}

async fn admit_at(store: &dyn Store, epoch: u64, count: usize, at: u64) -> u64 {
    let tokens: Vec<String> = (0..count).map(|_| entry_token(ROOM)).collect();
    let outcome = store
        .admit(
            room_id(ROOM),
            &AdmitRequest {
                holder: "leader",
                epoch,
                now_ms: at,
                token_ttl_ms: 600_000,
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

async fn read_all(store: &dyn Store, ids: &[String], at: u64) -> Vec<TicketRecord> {
    let mut records = Vec::new();
    for chunk in ids.chunks(500) {
        let answer = store
            .sse_refresh(room_id(ROOM), None, chunk, at)
            .await
            .unwrap();
        records.extend(answer.tickets.into_iter().map(|r| r.expect("known").0));
    }
    records
}

/// The waiting tickets among `ids` in lottery order (smallest key first).
fn by_key(seed: &[u8], ids: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut ids: Vec<String> = ids.into_iter().collect();
    ids.sort_by_cached_key(|id| format!("{}{id}", draw_key(seed, id)));
    ids
}

/// Every waiting ticket's position is its 1-based rank by key among `waiting`.
async fn assert_ranked(store: &dyn Store, seed: &[u8], waiting: &[String], at: u64, when: &str) {
    let kind = store.kind();
    let order = by_key(seed, waiting.iter().cloned());
    let records = read_all(store, &order, at).await;
    for (rank, record) in records.iter().enumerate() {
        assert_eq!(record.state, TicketState::Waiting, "{kind} {when}");
        assert_eq!(
            record.position,
            Some(rank as u64 + 1),
            "{kind} {when}: positions are ranks by key"
        );
    }
    let counts = store.counts(room_id(ROOM), at).await.unwrap();
    assert_eq!(
        counts.waiting,
        waiting.len() as u64,
        "{kind} {when}: none lost"
    );
}

/// FIFO → random with people waiting, later arrivals drawing in among them, leaves, a skip of
/// silent tickets, admission in key order, then back to FIFO.
async fn the_lottery_on(store: &dyn Store) {
    let kind = store.kind();
    let start = now_ms();
    let epoch = store
        .lease(room_id(ROOM), "leader")
        .await
        .unwrap()
        .epoch
        .expect("the lease is free");

    // 40 wait in arrival order before the switch.
    let mut waiting: Vec<String> = Vec::new();
    for _ in 0..40 {
        let outcome = store
            .join_line(room_id(ROOM), None, &random_id())
            .await
            .unwrap();
        waiting.push(outcome.ticket.id);
    }
    let arrival = waiting.clone();

    // The switch puts every waiting ticket into the lottery at once (the seed exists first: the
    // admin API makes sure of it).
    let seed_hex = store
        .draw_seed(room_id(ROOM), &fresh_seed())
        .await
        .unwrap()
        .seed;
    let seed = seed_bytes(&seed_hex).unwrap();
    let updated = support::change(store, ROOM, &method(QueueingMethod::Random), None)
        .await
        .unwrap();
    assert!(
        matches!(updated, vestibule_store::SettingsUpdate::Applied(ref s)
            if s.settings.queueing_method == QueueingMethod::Random),
        "{kind}: {updated:?}"
    );
    assert_eq!(
        store
            .room_settings(ROOM)
            .await
            .unwrap()
            .settings
            .queueing_method,
        QueueingMethod::Random,
        "{kind}"
    );
    assert_ranked(store, &seed, &waiting, start, "after the switch").await;
    let before: HashMap<String, u64> = read_all(store, &waiting, start)
        .await
        .into_iter()
        .map(|r| (r.id, r.position.unwrap()))
        .collect();

    // 160 more: each one's join answer is already its rank by key.
    for _ in 0..160 {
        let outcome = store
            .join_line(room_id(ROOM), None, &random_id())
            .await
            .unwrap();
        waiting.push(outcome.ticket.id.clone());
        let order = by_key(&seed, waiting.iter().cloned());
        let rank = order
            .iter()
            .position(|id| *id == outcome.ticket.id)
            .unwrap();
        assert_eq!(
            outcome.ticket.position,
            Some(rank as u64 + 1),
            "{kind}: a join's position"
        );
    }
    assert_ranked(store, &seed, &waiting, start, "after later joins").await;
    let after = read_all(store, &arrival, start).await;
    assert!(
        after.iter().any(|r| r.position.unwrap() > before[&r.id]),
        "{kind}: later arrivals with smaller keys move earlier ones back"
    );

    // Leaves: ten, anywhere in the order.
    let leavers: Vec<String> = waiting.iter().step_by(17).take(10).cloned().collect();
    for id in &leavers {
        store.leave(room_id(ROOM), id, start).await.unwrap();
    }
    waiting.retain(|id| !leavers.contains(id));
    assert_ranked(store, &seed, &waiting, start, "after leaves").await;

    // Silence: everyone but ten is heard from ten minutes on; the tick then skips those ten
    // (hold 0: their places are gone), and never admits them.
    let later = start + 600_000;
    let silent: Vec<String> = waiting
        .iter()
        .skip(3)
        .step_by(13)
        .take(10)
        .cloned()
        .collect();
    let heard: Vec<String> = waiting
        .iter()
        .filter(|id| !silent.contains(id))
        .cloned()
        .collect();
    store
        .hear(room_id(ROOM), &heard, later, false)
        .await
        .unwrap();
    admit_at(store, epoch, 0, later + 1_000).await;
    waiting.retain(|id| !silent.contains(id));
    assert_ranked(store, &seed, &waiting, later + 1_000, "after the skip").await;

    // Admission: batches of 9 take exactly the 9 smallest keys each, until nobody waits.
    let all: Vec<String> = waiting.clone();
    let mut admitted: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    while !waiting.is_empty() {
        let order = by_key(&seed, waiting.iter().cloned());
        let expected: Vec<String> = order.iter().take(9).cloned().collect();
        let n = admit_at(store, epoch, 9, later + 2_000).await;
        assert_eq!(n, expected.len() as u64, "{kind}");
        let records = read_all(store, &all, later + 2_000).await;
        let issued: Vec<String> = records
            .iter()
            .filter(|r| r.state == TicketState::TokenIssued && !seen.contains(&r.id))
            .map(|r| r.id.clone())
            .collect();
        let mut got = issued.clone();
        got.sort();
        let mut want = expected.clone();
        want.sort();
        assert_eq!(got, want, "{kind}: admission takes the smallest keys");
        for id in issued {
            assert!(seen.insert(id.clone()), "{kind}: admitted twice");
            admitted.push(id);
        }
        waiting.retain(|id| !expected.contains(id));
        assert_ranked(store, &seed, &waiting, later + 2_000, "between admissions").await;
    }
    assert_eq!(admitted.len(), all.len(), "{kind}: everyone admitted once");
    for id in silent.iter().chain(&leavers) {
        assert!(
            !seen.contains(id),
            "{kind}: a leaver or a silent ticket was admitted"
        );
    }
    // The whole admission order is the published keys' order (recomputed from the seed).
    let mut in_batches = Vec::new();
    let full = by_key(&seed, all.iter().cloned());
    for batch in full.chunks(9) {
        let mut batch = batch.to_vec();
        batch.sort();
        in_batches.extend(batch);
    }
    let mut got_batches = Vec::new();
    for batch in admitted.chunks(9) {
        let mut batch = batch.to_vec();
        batch.sort();
        got_batches.extend(batch);
    }
    assert_eq!(
        got_batches, in_batches,
        "{kind}: admission order = key order"
    );
}

/// FIFO → random → FIFO with people waiting: nobody is lost, and FIFO is arrival order again.
async fn there_and_back_on(store: &dyn Store) {
    let kind = store.kind();
    let at = now_ms();
    let mut arrival = Vec::new();
    for _ in 0..30 {
        arrival.push(
            store
                .join_line(room_id(ROOM), None, &random_id())
                .await
                .unwrap()
                .ticket
                .id,
        );
    }
    let seed = seed_bytes(
        &store
            .draw_seed(room_id(ROOM), &fresh_seed())
            .await
            .unwrap()
            .seed,
    )
    .unwrap();
    support::change(store, ROOM, &method(QueueingMethod::Random), None)
        .await
        .unwrap();
    for _ in 0..30 {
        arrival.push(
            store
                .join_line(room_id(ROOM), None, &random_id())
                .await
                .unwrap()
                .ticket
                .id,
        );
    }
    assert_ranked(store, &seed, &arrival, at, "random").await;
    store.leave(room_id(ROOM), &arrival[40], at).await.unwrap();
    arrival.remove(40);
    support::change(store, ROOM, &method(QueueingMethod::Fifo), None)
        .await
        .unwrap();
    let records = read_all(store, &arrival, at).await;
    for (i, record) in records.iter().enumerate() {
        assert_eq!(
            (record.state, record.position),
            (TicketState::Waiting, Some(i as u64 + 1)),
            "{kind}: FIFO again is arrival order"
        );
    }
    let late = store
        .join_line(room_id(ROOM), None, &random_id())
        .await
        .unwrap();
    assert_eq!(
        late.ticket.position,
        Some(arrival.len() as u64 + 1),
        "{kind}"
    );
    // And random again (the seed is still secret here: no API published it).
    support::change(store, ROOM, &method(QueueingMethod::Random), None)
        .await
        .unwrap();
    arrival.push(late.ticket.id);
    assert_ranked(store, &seed, &arrival, at, "random again").await;
}

#[tokio::test]
async fn a_random_room_admits_by_key_and_ranks_by_key() {
    for (store, _redis, _dir) in support::stores(&[ROOM], &defaults()).await {
        the_lottery_on(&*store).await;
    }
}

#[tokio::test]
async fn switching_to_random_and_back_keeps_every_waiting_ticket() {
    for (store, _redis, _dir) in support::stores(&[ROOM], &defaults()).await {
        there_and_back_on(&*store).await;
    }
}

/// A silent ticket skipped in a random room and heard from within its hold goes back into the
/// lottery at its key's rank (not at the back, not lost).
async fn a_returning_ticket_on(store: &dyn Store) {
    let kind = store.kind();
    let start = now_ms();
    let epoch = store
        .lease(room_id(ROOM), "leader")
        .await
        .unwrap()
        .epoch
        .expect("the lease is free");
    let seed = seed_bytes(
        &store
            .draw_seed(room_id(ROOM), &fresh_seed())
            .await
            .unwrap()
            .seed,
    )
    .unwrap();
    support::change(store, ROOM, &method(QueueingMethod::Random), None)
        .await
        .unwrap();
    let mut waiting = Vec::new();
    for _ in 0..50 {
        waiting.push(
            store
                .join_line(room_id(ROOM), None, &random_id())
                .await
                .unwrap()
                .ticket
                .id,
        );
    }
    // One is silent for ten minutes, the rest are heard; the tick skips it (hold: one hour).
    let later = start + 600_000;
    let away = waiting[17].clone();
    let heard: Vec<String> = waiting.iter().filter(|id| **id != away).cloned().collect();
    store
        .hear(room_id(ROOM), &heard, later, false)
        .await
        .unwrap();
    let tokens: Vec<String> = Vec::new();
    let outcome = store
        .admit(
            room_id(ROOM),
            &AdmitRequest {
                holder: "leader",
                epoch,
                now_ms: later + 1_000,
                token_ttl_ms: 600_000,
                max_active_users: None,
                tokens: &tokens,
                abandon_after_ms: 300_000,
                hold_place_ms: 3_600_000,
                instant_bank_max: 0,
                pace: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(outcome.skipped, 1, "{kind}");
    let rest: Vec<String> = heard.clone();
    assert_ranked(store, &seed, &rest, later + 1_000, "while one is held").await;
    // It comes back: its rank by key among all 50 again.
    let back = store
        .hear(
            room_id(ROOM),
            std::slice::from_ref(&away),
            later + 2_000,
            true,
        )
        .await
        .unwrap();
    let back = back[0].clone().expect("known");
    assert!(back.place_kept, "{kind}");
    let order = by_key(&seed, waiting.iter().cloned());
    let rank = order.iter().position(|id| *id == away).unwrap() as u64 + 1;
    assert_eq!(back.position, Some(rank), "{kind}: back at its key's rank");
    assert_ranked(store, &seed, &waiting, later + 2_000, "after the return").await;
    // And it is admitted in its turn, not lost.
    let n = admit_at(store, epoch, 50, later + 3_000).await;
    assert_eq!(n, 50, "{kind}: everyone admitted");
    assert_eq!(
        store
            .counts(room_id(ROOM), later + 3_000)
            .await
            .unwrap()
            .waiting,
        0
    );
}

#[tokio::test]
async fn a_skipped_ticket_returns_to_its_rank_by_key() {
    for (store, _redis, _dir) in support::stores(&[ROOM], &defaults()).await {
        a_returning_ticket_on(&*store).await;
    }
}

/// Redis: a replica that never saw the switch (another replica made it) still files its joins
/// in the lottery: join.lua asks it for the key. And the leader's tick finishes a filing that
/// the switching replica left undone.
#[tokio::test]
async fn another_replica_joins_a_random_room_and_the_leader_finishes_a_filing() {
    let redis = vestibule_tests::RedisServer::start();
    let connect = || async {
        vestibule_store::redis::RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2))
            .await
            .unwrap()
    };
    let (one, two) = (connect().await, connect().await);
    one.seed_room(ROOM, &defaults()).await.unwrap();
    two.seed_room(ROOM, &defaults()).await.unwrap();
    let mut waiting = Vec::new();
    for _ in 0..20 {
        waiting.push(
            two.join_line(room_id(ROOM), None, &random_id())
                .await
                .unwrap()
                .ticket
                .id,
        );
    }
    let seed = seed_bytes(
        &one.draw_seed(room_id(ROOM), &fresh_seed())
            .await
            .unwrap()
            .seed,
    )
    .unwrap();
    support::change(&one, ROOM, &method(QueueingMethod::Random), None)
        .await
        .unwrap();
    let at = now_ms();
    for _ in 0..20 {
        waiting.push(
            two.join_line(room_id(ROOM), None, &random_id())
                .await
                .unwrap()
                .ticket
                .id,
        );
    }
    assert_ranked(&two, &seed, &waiting, at, "joins through the other replica").await;

    // A filing left undone (the switching replica died after update_room.lua): lottery_filing
    // stands and some tickets are not filed. Positions read arrival order meanwhile, nobody is
    // admitted, and the leader's tick files them.
    let mut connection = one.connection();
    let keys = |name: &str| format!("vestibule:{{{ROOM}}}:g1:{name}");
    let _: () = redis::cmd("SET")
        .arg(keys("lottery_filing"))
        .arg("1")
        .query_async(&mut connection)
        .await
        .unwrap();
    let _: () = redis::cmd("DEL")
        .arg(keys("lottery"))
        .arg(keys("lottery_mac"))
        .query_async(&mut connection)
        .await
        .unwrap();
    let records = read_all(&two, &waiting, at).await;
    for (i, record) in records.iter().enumerate() {
        assert_eq!(
            record.position,
            Some(i as u64 + 1),
            "arrival order while filing"
        );
    }
    let epoch = two
        .lease(room_id(ROOM), "leader")
        .await
        .unwrap()
        .epoch
        .unwrap();
    assert_eq!(
        admit_at(&two, epoch, 5, at).await,
        0,
        "nobody admitted while filing"
    );
    assert_ranked(&two, &seed, &waiting, at, "after the leader's filing").await;
    let first: Vec<String> = by_key(&seed, waiting.iter().cloned())
        .into_iter()
        .take(5)
        .collect();
    assert_eq!(admit_at(&two, epoch, 5, at).await, 5);
    for record in read_all(&two, &first, at).await {
        assert_eq!(
            record.state,
            TicketState::TokenIssued,
            "the smallest keys first"
        );
    }
}

/// The durable store rebuilds the lottery from its journal: the same ranks after a reopen.
#[tokio::test]
async fn a_reopened_durable_store_keeps_the_lottery() {
    use vestibule_store::durable::{DurableOptions, DurableStore};
    let dir = tempfile::tempdir().unwrap();
    let at = now_ms();
    let (seed, waiting) = {
        let store = DurableStore::open(dir.path(), DurableOptions::default()).unwrap();
        store.seed_room(ROOM, &defaults()).await.unwrap();
        let seed = seed_bytes(
            &store
                .draw_seed(room_id(ROOM), &fresh_seed())
                .await
                .unwrap()
                .seed,
        )
        .unwrap();
        let mut waiting = Vec::new();
        for _ in 0..10 {
            waiting.push(
                store
                    .join_line(room_id(ROOM), None, &random_id())
                    .await
                    .unwrap()
                    .ticket
                    .id,
            );
        }
        support::change(&store, ROOM, &method(QueueingMethod::Random), None)
            .await
            .unwrap();
        for _ in 0..10 {
            waiting.push(
                store
                    .join_line(room_id(ROOM), None, &random_id())
                    .await
                    .unwrap()
                    .ticket
                    .id,
            );
        }
        store.leave(room_id(ROOM), &waiting[3], at).await.unwrap();
        waiting.remove(3);
        assert_ranked(&store, &seed, &waiting, at, "before the restart").await;
        (seed, waiting)
    };
    let store = DurableStore::open(dir.path(), DurableOptions::default()).unwrap();
    assert_ranked(&store, &seed, &waiting, at, "after the restart").await;
}

/// Redis: a switch with more waiting tickets than one filing batch (5,000) files them all, page
/// after page, before anyone is admitted.
#[tokio::test]
async fn a_switch_files_more_than_one_batch() {
    let redis = vestibule_tests::RedisServer::start();
    let store = vestibule_store::redis::RedisStore::connect(
        &redis.url(),
        std::time::Duration::from_secs(2),
    )
    .await
    .unwrap();
    store.seed_room(ROOM, &defaults()).await.unwrap();
    let mut waiting = Vec::new();
    for _ in 0..12_345 {
        waiting.push(
            store
                .join_line(room_id(ROOM), None, &random_id())
                .await
                .unwrap()
                .ticket
                .id,
        );
    }
    // Some leave before the switch: their seqs are gaps in the pages.
    for id in waiting.iter().step_by(1_000) {
        store.leave(room_id(ROOM), id, now_ms()).await.unwrap();
    }
    let waiting: Vec<String> = waiting
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 1_000 != 0)
        .map(|(_, id)| id)
        .collect();
    let seed = seed_bytes(
        &store
            .draw_seed(room_id(ROOM), &fresh_seed())
            .await
            .unwrap()
            .seed,
    )
    .unwrap();
    support::change(&store, ROOM, &method(QueueingMethod::Random), None)
        .await
        .unwrap();
    assert_ranked(
        &store,
        &seed,
        &waiting,
        now_ms(),
        "after a three-batch filing",
    )
    .await;
    let epoch = store
        .lease(room_id(ROOM), "leader")
        .await
        .unwrap()
        .epoch
        .unwrap();
    assert_eq!(
        admit_at(&store, epoch, 3, now_ms()).await,
        3,
        "filing is done"
    );
}
