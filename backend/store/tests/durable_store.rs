//! The durable embedded store across restarts: closing and reopening its data dir mid-sale keeps
//! every waiting place, issued and used token, keyed ticket, join limit and settings version;
//! a torn last journal record is dropped; a second opener is refused.

mod support;
use support::JoinLine;

use support::defaults;
use support::room_id;

use std::path::Path;

use proptest::prelude::*;
use vestibule_shared::TicketState;
use vestibule_store::durable::{DurableOptions, DurableStore, FsyncPolicy, OpenError};
use vestibule_store::ids::{entry_token, random_id};
use vestibule_store::memory::MemoryStore;
use vestibule_store::{
    now_ms, Admission, AdmitRequest, Catalog, InstantAdmission, JoinKind, JoinLimit, JoinReply,
    JoinRequest, OrderClaim, Queue, SettingsPatch, SettingsUpdate, Store, TicketRecord, TokenCheck,
    TokenUse,
};

const ROOM: &str = "main";

async fn open(dir: &Path, compact_after_bytes: u64) -> DurableStore {
    let options = DurableOptions {
        fsync: FsyncPolicy::Never,
        compact_after_bytes,
    };
    let store = DurableStore::open(dir, options).expect("data dir opens");
    store.seed_room(ROOM, &defaults()).await.unwrap();
    store
}

/// Admits up to `tokens.len()` shoppers as a fresh leader.
async fn admit(store: &dyn Store, tokens: &[String]) -> u64 {
    admit_at(store, tokens, now_ms()).await
}

/// [`admit`] with the tick's time.
async fn admit_at(store: &dyn Store, tokens: &[String], now: u64) -> u64 {
    admit_banking(store, tokens, now, 0).await
}

/// [`admit_at`] that banks up to `bank_max` unused admissions for instant joins.
async fn admit_banking(store: &dyn Store, tokens: &[String], now: u64, bank_max: u64) -> u64 {
    let holder = random_id();
    let lease = store.lease(room_id(ROOM), &holder).await;
    let epoch = lease.unwrap().epoch.expect("the lease is free");
    let request = AdmitRequest {
        holder: &holder,
        epoch,
        now_ms: now,
        token_ttl_ms: 60_000,
        max_active_users: None,
        tokens,
        abandon_after_ms: u64::MAX / 2,
        hold_place_ms: 0,
        instant_bank_max: bank_max,
        pace: None,
    };
    let outcome = store.admit(room_id(ROOM), &request).await.unwrap();
    store.release_lease(room_id(ROOM), &holder).await.unwrap();
    outcome.admitted
}

/// Everything a client can read about `ids`, the room's counts and its settings.
async fn observe(store: &dyn Store, ids: &[String]) -> (Vec<Option<TicketRecord>>, String) {
    let now = now_ms();
    let refresh = store
        .sse_refresh(room_id(ROOM), None, ids, now)
        .await
        .unwrap();
    let tickets = refresh.tickets.into_iter().map(|t| t.map(|(r, _)| r));
    let room = format!(
        "{:?} {:?} {:?}",
        refresh.cursor,
        store.counts(room_id(ROOM), now).await.unwrap(),
        store.room_settings(ROOM).await.unwrap()
    );
    (tickets.collect(), room)
}

fn limit() -> JoinLimit {
    JoinLimit {
        client: "198.51.100.7".into(),
        per_minute: 12,
    }
}

async fn keyed_join(store: &dyn Store, key: &str) -> JoinReply {
    let (id, limit) = (random_id(), limit());
    let request = JoinRequest::new(&id).keyed(Some(key)).limited(Some(&limit));
    store.join(room_id(ROOM), &request).await.unwrap()
}

fn joined(reply: JoinReply) -> (String, Option<u64>, bool) {
    match reply {
        JoinReply::Joined(outcome) => (outcome.ticket.id, outcome.ticket.position, outcome.created),
        JoinReply::RateLimited { .. } => panic!("join refused by the limit"),
        JoinReply::Refused(refusal) => panic!("join refused: {refusal:?}"),
        JoinReply::SettingsChanged => panic!("no settings version was named"),
    }
}

/// A sale: settings changed twice, 10 keyed joins (one leaves), 3 admitted, one token used by
/// an order, one given back. Returns the ticket ids and the issued tokens.
async fn sale(store: &dyn Store) -> (Vec<String>, Vec<String>) {
    for rate in [7.0, 9.0] {
        let patch = SettingsPatch {
            admission_rate_per_sec: Some(rate),
            ..SettingsPatch::default()
        };
        let update = support::change(store, ROOM, &patch, None).await.unwrap();
        assert!(matches!(update, SettingsUpdate::Applied(_)));
    }
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(joined(keyed_join(store, &format!("k:{i}")).await).0);
    }
    store.leave(room_id(ROOM), &ids[2], now_ms()).await.unwrap();
    let tokens: Vec<String> = (0..3).map(|_| entry_token(ROOM)).collect();
    assert_eq!(admit(store, &tokens).await, 3);
    let claim = OrderClaim {
        idempotency_key: Some("order-1"),
        receipt: r#"{"orderId":"first"}"#,
    };
    let used = store
        .consume_token(room_id(ROOM), &tokens[0], &claim, now_ms())
        .await
        .unwrap();
    assert!(matches!(used, TokenUse::Consumed { .. }));
    store.leave(room_id(ROOM), &ids[3], now_ms()).await.unwrap();
    (ids, tokens)
}

/// What must hold after a restart of a store that ran [`sale`].
async fn check_after_restart(store: &dyn Store, ids: &[String], tokens: &[String]) {
    let (tickets, _) = observe(store, ids).await;
    let states: Vec<_> = tickets.iter().map(|t| t.as_ref().unwrap().state).collect();
    use TicketState::{Completed, Left, TokenIssued, Waiting};
    assert_eq!(
        states,
        [
            Completed,
            TokenIssued,
            Left,
            Left,
            Waiting,
            Waiting,
            Waiting,
            Waiting,
            Waiting,
            Waiting
        ]
    );
    let positions: Vec<_> = tickets[4..]
        .iter()
        .map(|t| t.as_ref().unwrap().position)
        .collect();
    assert_eq!(positions, (1..=6).map(Some).collect::<Vec<_>>());
    // Issued tokens stay valid, used ones used (the retried order gets its receipt), given-back
    // ones unknown.
    let mut checks = Vec::new();
    for token in tokens {
        checks.push(
            store
                .check_token(room_id(ROOM), token, now_ms())
                .await
                .unwrap(),
        );
    }
    let valid = TokenCheck::Valid {
        ticket_id: ids[1].clone(),
    };
    assert_eq!(checks, [TokenCheck::Used, valid, TokenCheck::Unknown]);
    let retry = OrderClaim {
        idempotency_key: Some("order-1"),
        receipt: "{}",
    };
    let replay = store
        .consume_token(room_id(ROOM), &tokens[0], &retry, now_ms())
        .await
        .unwrap();
    assert_eq!(
        replay,
        TokenUse::Replayed {
            ticket_id: ids[0].clone(),
            receipt: r#"{"orderId":"first"}"#.into()
        }
    );
    // A keyed re-join finds its ticket and place; a key whose ticket left gets the back.
    assert_eq!(
        joined(keyed_join(store, "k:6").await),
        (ids[6].clone(), Some(3), false)
    );
    // Created at version 1 (its generation), changed twice.
    assert_eq!(store.room_settings(ROOM).await.unwrap().version, 3);
    // The join limit kept its count: 10 of 12 used, one more now, then refused.
    let (_, position, created) = joined(keyed_join(store, "k:2").await);
    assert_eq!((position, created), (Some(7), true));
    assert!(matches!(
        keyed_join(store, "k:new").await,
        JoinReply::Joined(_)
    ));
    assert!(matches!(
        keyed_join(store, "k:over").await,
        JoinReply::RateLimited { .. }
    ));
    // Admission goes on in arrival order with a new lease.
    let more: Vec<String> = (0..1).map(|_| entry_token(ROOM)).collect();
    assert_eq!(admit(store, &more).await, 1);
    let first = store
        .ticket(room_id(ROOM), &ids[4], now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.state, TicketState::TokenIssued);
}

#[tokio::test]
async fn a_reopened_data_dir_keeps_places_tokens_keys_limits_and_settings() {
    // Once with the journal only, once with snapshots written along the way.
    for compact_after_bytes in [64 << 20, 512] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), compact_after_bytes).await;
        let (ids, tokens) = sale(&store).await;
        let before = observe(&store, &ids).await;
        drop(store);
        let store = open(dir.path(), compact_after_bytes).await;
        assert_eq!(observe(&store, &ids).await, before, "{compact_after_bytes}");
        check_after_restart(&store, &ids, &tokens).await;
        // And again after those changes.
        let before = observe(&store, &ids).await;
        drop(store);
        let store = open(dir.path(), compact_after_bytes).await;
        assert_eq!(observe(&store, &ids).await, before);
    }
}

#[tokio::test]
async fn a_torn_last_record_is_dropped_and_an_old_journal_is_not_applied_twice() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.log");
    let store = open(dir.path(), 64 << 20).await;
    let (ids, _) = sale(&store).await;
    // A snapshot that a crash interrupted before the journal was emptied: the old records
    // stay next to the new snapshot.
    let old_records = std::fs::read(&journal).unwrap();
    store.compact().unwrap();
    joined(keyed_join(&store, "k:late").await);
    let before = observe(&store, &ids).await;
    drop(store);
    let mut bytes = old_records;
    bytes.extend(std::fs::read(&journal).unwrap());
    // A crash in the middle of the next write.
    bytes.extend_from_slice(b"1a2b3c4d 99 {\"op\":\"join\",\"room\":\"ma");
    std::fs::write(&journal, bytes).unwrap();
    let store = open(dir.path(), 64 << 20).await;
    assert_eq!(observe(&store, &ids).await, before);
    assert_eq!(
        store.counts(room_id(ROOM), now_ms()).await.unwrap().waiting,
        7
    );
}

#[tokio::test]
async fn a_crash_during_a_background_snapshot_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.log");
    let store = open(dir.path(), 64 << 20).await;
    let (ids, _) = sale(&store).await;
    drop(store);
    let taken_in = std::fs::read(&journal).unwrap();
    let store = open(dir.path(), 64 << 20).await;
    joined(keyed_join(&store, "k:late").await);
    let before = observe(&store, &ids).await;
    drop(store);
    // The files as a crash leaves them mid-snapshot: the journal being taken in moved to
    // journal.old, later changes in a new journal.log, no snapshot written yet.
    let all = std::fs::read(&journal).unwrap();
    std::fs::write(dir.path().join("journal.old"), &taken_in).unwrap();
    std::fs::write(&journal, &all[taken_in.len()..]).unwrap();
    let store = open(dir.path(), 64 << 20).await;
    assert_eq!(observe(&store, &ids).await, before);
    assert!(
        !dir.path().join("journal.old").exists(),
        "taken in by a snapshot at start"
    );
}

#[tokio::test]
async fn a_second_process_on_the_same_data_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path(), 64 << 20).await;
    let second = DurableStore::open(dir.path(), DurableOptions::default());
    assert!(
        matches!(second, Err(OpenError::Locked { .. })),
        "{second:?}"
    );
    let message = second.unwrap_err().to_string();
    assert!(
        message.contains("in use by another Vestibule process"),
        "{message}"
    );
    drop(first);
    DurableStore::open(dir.path(), DurableOptions::default()).expect("free again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fsync_always_changes_are_kept_on_a_multi_threaded_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let options = DurableOptions {
        fsync: FsyncPolicy::Always,
        ..DurableOptions::default()
    };
    let store = DurableStore::open(dir.path(), options).unwrap();
    store.seed_room(ROOM, &defaults()).await.unwrap();
    let (ids, _) = sale(&store).await;
    let before = observe(&store, &ids).await;
    drop(store);
    let store = DurableStore::open(dir.path(), options).unwrap();
    assert_eq!(observe(&store, &ids).await, before);
}

#[cfg(unix)]
#[tokio::test]
async fn a_new_data_dir_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    drop(open(&dir, 64 << 20).await);
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[tokio::test]
async fn a_damaged_snapshot_stops_the_start_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), 64 << 20).await);
    std::fs::write(dir.path().join("snapshot.json"), b"{\"format\":1,").unwrap();
    let reason = DurableStore::open(dir.path(), DurableOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        reason.contains("snapshot.json does not read back"),
        "{reason}"
    );
}

/// One step of a random sale, replayed on a memory store and a durable one.
#[derive(Debug, Clone)]
enum Step {
    Join(Option<u8>),
    Leave(usize),
    Admit(usize),
    Use(usize),
    Reopen,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            5 => prop::option::of(0u8..8).prop_map(Step::Join),
            1 => any::<usize>().prop_map(Step::Leave),
            2 => (0usize..4).prop_map(Step::Admit),
            1 => any::<usize>().prop_map(Step::Use),
            1 => Just(Step::Reopen),
        ],
        1..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    // Whatever the sale and wherever it restarts (journal only or with snapshots between), the
    // durable store answers every read exactly as a memory store that never restarted.
    #[test]
    fn a_durable_store_restarted_anywhere_matches_one_that_never_restarted(plan in steps()) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let model = MemoryStore::new();
            model.seed_room(ROOM, &defaults()).await.unwrap();
            let mut durable = open(dir.path(), 2048).await;
            let (mut ids, mut tokens) = (Vec::new(), Vec::new());
            for step in &plan {
                let stores: [&dyn Store; 2] = [&model, &durable];
                match step {
                    Step::Join(key) => {
                        let (id, key) = (random_id(), key.map(|k| format!("k:{k}")));
                        for store in stores {
                            store.join_line(room_id(ROOM), key.as_deref(), &id).await.unwrap();
                        }
                        ids.push(id);
                    }
                    Step::Leave(pick) if !ids.is_empty() => {
                        let id = &ids[pick % ids.len()];
                        let now = now_ms();
                        for store in stores {
                            store.leave(room_id(ROOM), id, now).await.unwrap();
                        }
                    }
                    Step::Admit(count) => {
                        let fresh: Vec<String> = (0..*count).map(|_| entry_token(ROOM)).collect();
                        let now = now_ms();
                        for store in stores {
                            admit_at(store, &fresh, now).await;
                        }
                        tokens.extend(fresh);
                    }
                    Step::Use(pick) if !tokens.is_empty() => {
                        let token = &tokens[pick % tokens.len()];
                        let claim = OrderClaim { idempotency_key: Some("o"), receipt: "{}" };
                        let now = now_ms();
                        let mut answers = Vec::new();
                        for store in stores {
                            answers.push(store.consume_token(room_id(ROOM), token, &claim, now).await.unwrap());
                        }
                        prop_assert_eq!(&answers[0], &answers[1]);
                    }
                    Step::Reopen => {
                        drop(durable);
                        durable = open(dir.path(), 2048).await;
                    }
                    Step::Leave(_) | Step::Use(_) => {}
                }
                prop_assert_eq!(observe(&model, &ids).await, observe(&durable, &ids).await);
            }
            Ok(())
        })?;
    }
}

/// An instant join: `(id, state, entry token)` of the ticket it answered.
async fn instant_join(store: &dyn Store) -> (String, TicketState, Option<String>) {
    let instant = InstantAdmission {
        token: entry_token(ROOM),
        now_ms: now_ms(),
        token_ttl_ms: 60_000,
        settings_version: None,
    };
    let id = random_id();
    let request = JoinRequest::new(&id).of_kind(JoinKind::Admitting(&instant));
    let reply = store.join(room_id(ROOM), &request).await.unwrap();
    let JoinReply::Joined(outcome) = reply else {
        panic!("no limit to refuse the join");
    };
    let ticket = outcome.ticket;
    assert_eq!(
        ticket.entry_token.is_some(),
        ticket.entry_token.as_deref() == Some(instant.token.as_str())
    );
    (ticket.id, ticket.state, ticket.entry_token)
}

#[tokio::test]
async fn an_instant_join_spends_the_banked_quota_once_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), u64::MAX).await;
    // Nothing banked yet: the join waits.
    let (first, state, _) = instant_join(&store).await;
    assert_eq!(state, TicketState::Waiting);
    // A tick admits it with a quota of 3: 2 unused, of which 1 (the most) is banked.
    let tokens: Vec<String> = (0..3).map(|_| entry_token(ROOM)).collect();
    assert_eq!(admit_banking(&store, &tokens, now_ms(), 1).await, 1);
    let (instant, state, token) = instant_join(&store).await;
    assert_eq!(state, TicketState::TokenIssued, "the bank admits at once");
    let token = token.expect("an entry token");
    // The bank is spent: the next join waits for a tick.
    let (after, state, _) = instant_join(&store).await;
    assert_eq!(state, TicketState::Waiting);
    // A tick that leaves someone waiting banks nothing.
    assert_eq!(admit_banking(&store, &tokens[..0], now_ms(), 1).await, 0);
    assert_eq!(instant_join(&store).await.1, TicketState::Waiting);
    drop(store);

    let store = open(dir.path(), u64::MAX).await;
    let (tickets, _) = observe(&store, &[first, instant, after]).await;
    let states: Vec<_> = tickets.iter().map(|t| t.as_ref().unwrap().state).collect();
    assert_eq!(
        states,
        [
            TicketState::TokenIssued,
            TicketState::TokenIssued,
            TicketState::Waiting
        ]
    );
    assert!(matches!(
        store
            .check_token(room_id(ROOM), &token, now_ms())
            .await
            .unwrap(),
        TokenCheck::Valid { .. }
    ));
}
