//! The store contract: the same checks against `MemoryStore`, `DurableStore` (a temp data dir)
//! and `RedisStore` (a private `redis-server`), so all keep docs/DESIGN.md's queue semantics.

use std::collections::HashSet;

use proptest::prelude::*;
use vestibule_shared::TicketState;
use vestibule_store::ids::{entry_token, random_id};
use vestibule_store::redis::RedisStore;
use vestibule_store::{
    now_ms, Admission, AdmitRequest, Catalog, JoinKind, JoinLimit, JoinReply, JoinRequest,
    LeaveOutcome, OrderClaim, Settings, SettingsPatch, SettingsUpdate, Store, TokenCheck, TokenUse,
};
use vestibule_tests::RedisServer;

mod support;
use support::JoinLine;

use support::room_id;

const ROOM: &str = "main";

fn defaults() -> Settings {
    Settings {
        checkout_url: Some("https://shop.example/checkout?from=queue".into()),
        ..support::defaults()
    }
}

/// Each store with its rooms initialised to [`defaults`].
async fn stores() -> Vec<support::UnderTest> {
    support::stores(&[ROOM], &defaults()).await
}

/// Many tickets read in one store call, in order.
async fn read_all(store: &dyn Store, ids: &[String]) -> Vec<Option<vestibule_store::TicketRecord>> {
    let answer = store
        .sse_refresh(room_id(ROOM), None, ids, now_ms())
        .await
        .unwrap();
    answer
        .tickets
        .into_iter()
        .map(|read| read.map(|(record, _)| record))
        .collect()
}

async fn lead(store: &dyn Store, holder: &str) -> u64 {
    store
        .lease(room_id(ROOM), holder)
        .await
        .unwrap()
        .epoch
        .expect("a free lease is taken")
}

async fn admit(store: &dyn Store, holder: &str, epoch: u64, count: usize, ttl_ms: u64) -> u64 {
    let tokens: Vec<String> = (0..count).map(|_| entry_token(ROOM)).collect();
    let outcome = store
        .admit(
            room_id(ROOM),
            &AdmitRequest {
                holder,
                epoch,
                now_ms: now_ms(),
                token_ttl_ms: ttl_ms,
                max_active_users: None,
                tokens: &tokens,
                abandon_after_ms: u64::MAX / 2,
                hold_place_ms: 0,
                instant_bank_max: 0,
                pace: None,
            },
        )
        .await
        .unwrap();
    assert!(
        !outcome.fenced,
        "{}: the current leader was fenced",
        store.kind()
    );
    outcome.admitted
}

#[tokio::test]
async fn joins_are_fifo_idempotent_and_positions_close_up_on_leave() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let mut ids = Vec::new();
        for i in 0..10 {
            let outcome = store
                .join_line(room_id(ROOM), Some(&format!("k{i}")), &random_id())
                .await
                .unwrap();
            assert!(outcome.created);
            assert_eq!(outcome.ticket.position, Some(i + 1), "{kind}");
            ids.push(outcome.ticket.id);
        }
        let again = store
            .join_line(room_id(ROOM), Some("k3"), &random_id())
            .await
            .unwrap();
        assert!(!again.created, "{kind}");
        assert_eq!(again.ticket.id, ids[3]);
        assert_eq!(again.ticket.position, Some(4));

        assert_eq!(
            store.leave(room_id(ROOM), &ids[0], now_ms()).await.unwrap(),
            LeaveOutcome::Left
        );
        let records = read_all(store.as_ref(), &ids).await;
        assert_eq!(
            records[0].as_ref().unwrap().state,
            TicketState::Left,
            "{kind}"
        );
        for (i, record) in records.iter().enumerate().skip(1) {
            assert_eq!(record.as_ref().unwrap().position, Some(i as u64), "{kind}");
        }
        // After leaving, the same key gets a fresh place at the back.
        let rejoin = store
            .join_line(room_id(ROOM), Some("k0"), &random_id())
            .await
            .unwrap();
        assert!(rejoin.created, "{kind}");
        assert_eq!(rejoin.ticket.position, Some(10));
        let counts = store.counts(room_id(ROOM), now_ms()).await.unwrap();
        assert_eq!(counts.waiting, 10, "{kind}");
    }
}

/// The dedup hash of `ROOM` in Redis: its field count (0 when the hash does not exist).
async fn dedup_fields(store: &RedisStore) -> u64 {
    redis::cmd("HLEN")
        .arg(format!("vestibule:{{{ROOM}}}:g1:dedup"))
        .query_async(&mut store.connection())
        .await
        .unwrap()
}

/// The room secret as stored in Redis.
async fn stored_secret(store: &RedisStore) -> Option<Vec<u8>> {
    redis::cmd("GET")
        .arg(format!("vestibule:{{{ROOM}}}:g1:secret"))
        .query_async(&mut store.connection())
        .await
        .unwrap()
}

async fn redis_store(redis: &RedisServer) -> RedisStore {
    let store = RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2))
        .await
        .expect("private redis-server answers");
    store.seed_room(ROOM, &defaults()).await.unwrap();
    store
}

#[tokio::test]
async fn a_retried_keyed_join_gets_the_same_ticket_and_place_and_costs_no_dedup_entry() {
    for (store, redis, _dir) in stores().await {
        let kind = store.kind();
        for _ in 0..3 {
            let id = random_id();
            let plain = store.join_line(room_id(ROOM), None, &id).await.unwrap();
            assert_eq!(
                plain.ticket.id, id,
                "{kind}: a join without a key keeps its random id"
            );
        }
        let first = store
            .join_line(room_id(ROOM), Some("k:page-key-1"), &random_id())
            .await
            .unwrap();
        assert!(first.created, "{kind}");
        assert_eq!(first.ticket.position, Some(4), "{kind}");
        assert!(vestibule_store::ids::is_well_formed_id(&first.ticket.id));
        store
            .join_line(room_id(ROOM), None, &random_id())
            .await
            .unwrap();
        for _ in 0..3 {
            let retry = store
                .join_line(room_id(ROOM), Some("k:page-key-1"), &random_id())
                .await
                .unwrap();
            assert!(!retry.created, "{kind}");
            assert_eq!(retry.ticket.id, first.ticket.id, "{kind}");
            assert_eq!(retry.ticket.position, Some(4), "{kind}");
        }
        let user = store
            .join_line(room_id(ROOM), Some("u:shopper-7"), &random_id())
            .await
            .unwrap();
        assert_eq!(user.ticket.position, Some(6), "{kind}");
        assert_ne!(user.ticket.id, first.ticket.id);
        if let Some(redis) = &redis {
            let redis_store = redis_store(redis).await;
            assert_eq!(
                dedup_fields(&redis_store).await,
                0,
                "first joins write no dedup entry"
            );
            // Another replica of the same room finds the same ticket.
            let retry = redis_store
                .join_line(room_id(ROOM), Some("k:page-key-1"), &random_id())
                .await
                .unwrap();
            assert!(!retry.created);
            assert_eq!(
                (retry.ticket.id, retry.ticket.position),
                (first.ticket.id.clone(), Some(4))
            );
        }
    }
}

#[tokio::test]
async fn after_leaving_a_key_gets_a_new_place_at_the_back_that_its_retries_find() {
    for (store, redis, _dir) in stores().await {
        let kind = store.kind();
        let a = store
            .join_line(room_id(ROOM), Some("k:a"), &random_id())
            .await
            .unwrap();
        store
            .join_line(room_id(ROOM), Some("k:b"), &random_id())
            .await
            .unwrap();
        assert_eq!(
            store
                .leave(room_id(ROOM), &a.ticket.id, now_ms())
                .await
                .unwrap(),
            LeaveOutcome::Left
        );
        let again = store
            .join_line(room_id(ROOM), Some("k:a"), &random_id())
            .await
            .unwrap();
        assert!(again.created, "{kind}");
        assert_ne!(again.ticket.id, a.ticket.id, "{kind}: a new ticket");
        assert_eq!(again.ticket.position, Some(2), "{kind}: at the back");
        let retry = store
            .join_line(room_id(ROOM), Some("k:a"), &random_id())
            .await
            .unwrap();
        assert!(!retry.created, "{kind}");
        assert_eq!(retry.ticket.id, again.ticket.id, "{kind}");
        assert_eq!(retry.ticket.position, Some(2), "{kind}");
        let old = store
            .ticket(room_id(ROOM), &a.ticket.id, now_ms())
            .await
            .unwrap();
        assert_eq!(old.unwrap().state, TicketState::Left, "{kind}");
        if let Some(redis) = &redis {
            let redis_store = redis_store(redis).await;
            assert_eq!(
                dedup_fields(&redis_store).await,
                1,
                "only the re-join is remembered"
            );
        }

        // A live token keeps its ticket; one that expired unused gives a fresh place.
        let epoch = lead(store.as_ref(), "a").await;
        assert_eq!(admit(store.as_ref(), "a", epoch, 1, 60_000).await, 1);
        let issued = store
            .join_line(room_id(ROOM), Some("k:b"), &random_id())
            .await
            .unwrap();
        assert!(!issued.created, "{kind}");
        assert_eq!(issued.ticket.state, TicketState::TokenIssued, "{kind}");
        assert_eq!(admit(store.as_ref(), "a", epoch, 1, 1).await, 1);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let expired = store
            .join_line(room_id(ROOM), Some("k:a"), &random_id())
            .await
            .unwrap();
        assert!(
            expired.created,
            "{kind}: an expired token is no live ticket"
        );
        assert_ne!(expired.ticket.id, again.ticket.id, "{kind}");
        assert_eq!(expired.ticket.position, Some(1), "{kind}");
    }
}

/// Retries `call` while Redis comes back (the connection manager reconnects in the background).
async fn until_ok<T, F, Fut>(mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, vestibule_store::StoreError>>,
{
    for _ in 0..100 {
        if let Ok(value) = call().await {
            return value;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("Redis did not come back");
}

#[tokio::test]
async fn a_restarted_empty_redis_keeps_keyed_joins_working_and_gets_its_secret_back() {
    let mut redis = RedisServer::start();
    let a = redis_store(&redis).await;
    let secret = stored_secret(&a)
        .await
        .expect("creating the room writes the secret");
    assert_eq!(secret.len(), 32);
    let held = a.room_settings(ROOM).await.unwrap();
    let before = a
        .join_line(room_id(ROOM), Some("k:x"), &random_id())
        .await
        .unwrap();

    redis.restart();
    // The lease reports the room lost (its document went with Redis); the replica writes back
    // the document it holds (`write_back_room`), and the next lease its copy of the secret.
    let lost = until_ok(|| async {
        match a.lease(room_id(ROOM), "a").await {
            Err(vestibule_store::StoreError::RoomLost(_)) => Ok(()),
            Ok(_) => Err(vestibule_store::StoreError::Corrupt("room not lost".into())),
            Err(error) => Err(error),
        }
    });
    lost.await;
    a.write_back_room(ROOM, &held).await.unwrap();
    a.lease(room_id(ROOM), "a").await.unwrap();
    assert_eq!(stored_secret(&a).await, Some(secret.clone()));
    let after =
        until_ok(|| async { a.join_line(room_id(ROOM), Some("k:x"), &random_id()).await }).await;
    assert!(after.created, "the queue was lost with Redis");
    assert_eq!(after.ticket.position, Some(1));
    assert_eq!(after.ticket.id, before.ticket.id, "same secret, same id");
    let retry = a
        .join_line(room_id(ROOM), Some("k:x"), &random_id())
        .await
        .unwrap();
    assert_eq!(
        (retry.created, retry.ticket.id),
        (false, before.ticket.id.clone())
    );
    let plain = a
        .join_line(room_id(ROOM), None, &random_id())
        .await
        .unwrap();
    assert_eq!(plain.ticket.position, Some(2));

    // Lost again, and a new replica starts before any lease call: it writes a new secret, which
    // the older replica takes up at its next lease call, so both derive the same ids again.
    redis.restart();
    let b = until_ok(|| async {
        let store = RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2)).await?;
        store.seed_room(ROOM, &defaults()).await?;
        Ok(store)
    })
    .await;
    let new_secret = stored_secret(&b).await.unwrap();
    assert_ne!(new_secret, secret);
    until_ok(|| async { a.lease(room_id(ROOM), "a").await }).await;
    assert_eq!(stored_secret(&a).await, Some(new_secret));
    let from_b = b
        .join_line(room_id(ROOM), Some("k:y"), &random_id())
        .await
        .unwrap();
    let from_a = a
        .join_line(room_id(ROOM), Some("k:y"), &random_id())
        .await
        .unwrap();
    assert!(from_b.created && !from_a.created);
    assert_eq!(from_a.ticket.id, from_b.ticket.id);

    // A store that never initialised the room reads the secret in force on its first keyed join.
    let c = RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let from_c = c
        .join_line(room_id(ROOM), Some("k:y"), &random_id())
        .await
        .unwrap();
    assert_eq!(
        (from_c.created, &from_c.ticket.id),
        (false, &from_b.ticket.id)
    );

    // Only the secret lost (a leader makes no lease calls while it leads): a later join checks
    // its copy against Redis again and writes it back.
    redis.cli(&["DEL", "vestibule:{main}:g1:secret"]);
    tokio::time::sleep(std::time::Duration::from_millis(5_100)).await;
    let again = a
        .join_line(room_id(ROOM), Some("k:y"), &random_id())
        .await
        .unwrap();
    assert_eq!(
        (again.created, &again.ticket.id),
        (false, &from_b.ticket.id)
    );
    assert_eq!(stored_secret(&a).await, stored_secret(&b).await);
    assert!(stored_secret(&a).await.is_some());
}

#[tokio::test]
async fn only_the_current_lease_holder_admits_and_a_stale_epoch_is_fenced() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        for _ in 0..5 {
            store
                .join_line(room_id(ROOM), None, &random_id())
                .await
                .unwrap();
        }
        let epoch = lead(store.as_ref(), "a").await;
        let follower = store.lease(room_id(ROOM), "b").await.unwrap();
        assert_eq!(follower.epoch, None, "{kind}: two leaders");
        let tokens = vec![entry_token(ROOM)];
        let request = |holder, epoch| AdmitRequest {
            holder,
            epoch,
            now_ms: now_ms(),
            token_ttl_ms: 60_000,
            max_active_users: None,
            tokens: &tokens,
            abandon_after_ms: u64::MAX / 2,
            hold_place_ms: 0,
            instant_bank_max: 0,
            pace: None,
        };
        assert!(
            store
                .admit(room_id(ROOM), &request("b", epoch))
                .await
                .unwrap()
                .fenced,
            "{kind}"
        );
        assert!(
            store
                .admit(room_id(ROOM), &request("a", epoch + 1))
                .await
                .unwrap()
                .fenced,
            "{kind}"
        );
        assert_eq!(
            store
                .admit(room_id(ROOM), &request("a", epoch))
                .await
                .unwrap()
                .admitted,
            1
        );
        store.release_lease(room_id(ROOM), "a").await.unwrap();
        let next = lead(store.as_ref(), "b").await;
        assert!(next > epoch, "{kind}: epochs must grow");
        assert!(
            store
                .admit(room_id(ROOM), &request("a", epoch))
                .await
                .unwrap()
                .fenced,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn a_token_is_consumed_exactly_once_even_when_raced() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let id = random_id();
        store.join_line(room_id(ROOM), None, &id).await.unwrap();
        let epoch = lead(store.as_ref(), "a").await;
        assert_eq!(admit(store.as_ref(), "a", epoch, 5, 60_000).await, 1);
        let token = store
            .ticket(room_id(ROOM), &id, now_ms())
            .await
            .unwrap()
            .unwrap()
            .entry_token
            .unwrap();
        // Sixteen different orders (each with its own key) race for one token.
        let attempts = (0..16).map(|i| {
            let store = store.clone();
            let token = token.clone();
            tokio::spawn(async move {
                let key = format!("order-{i}");
                let claim = OrderClaim {
                    idempotency_key: Some(&key),
                    receipt: "{}",
                };
                store
                    .consume_token(room_id(ROOM), &token, &claim, now_ms())
                    .await
                    .unwrap()
            })
        });
        let verdicts: Vec<TokenUse> = futures_util::future::join_all(attempts)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let valid = verdicts
            .iter()
            .filter(|v| matches!(v, TokenUse::Consumed { .. }))
            .count();
        assert_eq!(valid, 1, "{kind}: {verdicts:?}");
        assert!(verdicts.iter().all(|v| matches!(
            v,
            TokenUse::Consumed { .. } | TokenUse::Refused(TokenCheck::Used)
        )));
        let ticket = store
            .ticket(room_id(ROOM), &id, now_ms())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ticket.state, TicketState::Completed, "{kind}");
        assert_eq!(
            store.counts(room_id(ROOM), now_ms()).await.unwrap().active,
            0,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn a_retried_order_gets_the_first_receipt_and_any_other_use_of_its_token_is_refused() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let id = random_id();
        store.join_line(room_id(ROOM), None, &id).await.unwrap();
        let epoch = lead(store.as_ref(), "a").await;
        admit(store.as_ref(), "a", epoch, 1, 60_000).await;
        let ticket = store
            .ticket(room_id(ROOM), &id, now_ms())
            .await
            .unwrap()
            .unwrap();
        let token = ticket.entry_token.unwrap();
        let order = |key: Option<&'static str>, receipt: &'static str| OrderClaim {
            idempotency_key: key,
            receipt,
        };
        let consume = |claim: OrderClaim<'static>| {
            let store = store.clone();
            let token = token.clone();
            async move {
                store
                    .consume_token(room_id(ROOM), &token, &claim, now_ms())
                    .await
                    .unwrap()
            }
        };
        assert_eq!(
            consume(order(Some("k1"), r#"{"orderId":"first"}"#)).await,
            TokenUse::Consumed {
                ticket_id: id.clone()
            },
            "{kind}"
        );
        // The same order again (its answer was lost): the first receipt, nothing changes.
        assert_eq!(
            consume(order(Some("k1"), r#"{"orderId":"second"}"#)).await,
            TokenUse::Replayed {
                ticket_id: id.clone(),
                receipt: r#"{"orderId":"first"}"#.into()
            },
            "{kind}"
        );
        // Another order, or one without a key, finds the token used.
        for other in [order(Some("k2"), "{}"), order(None, "{}")] {
            assert_eq!(
                consume(other).await,
                TokenUse::Refused(TokenCheck::Used),
                "{kind}"
            );
        }
        assert_eq!(
            store
                .check_token(room_id(ROOM), &token, now_ms())
                .await
                .unwrap(),
            TokenCheck::Used,
            "{kind}"
        );
        let ticket = store
            .ticket(room_id(ROOM), &id, now_ms())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ticket.state, TicketState::Completed, "{kind}");
    }
}

#[tokio::test]
async fn the_join_limit_counts_only_joins_that_create_a_ticket() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let limit = |client: &str| JoinLimit {
            client: client.to_owned(),
            per_minute: 3,
        };
        let join = |key: String, client: &'static str| {
            let store = store.clone();
            async move {
                let (id, limit) = (random_id(), limit(client));
                let request = JoinRequest::new(&id)
                    .keyed(Some(&key))
                    .limited(Some(&limit));
                store.join(room_id(ROOM), &request).await.unwrap()
            }
        };
        let mut firsts = Vec::new();
        for i in 0..3 {
            match join(format!("k:{i}"), "198.51.100.1").await {
                JoinReply::Joined(outcome) => {
                    assert!(outcome.created, "{kind}");
                    firsts.push(outcome.ticket.id);
                }
                other => panic!("{kind}: join {i} refused: {other:?}"),
            }
        }
        let JoinReply::RateLimited { retry_after_ms } = join("k:3".into(), "198.51.100.1").await
        else {
            panic!("{kind}: a fourth new ticket within the minute was let in");
        };
        assert!(
            (1..=20_000).contains(&retry_after_ms),
            "{kind}: {retry_after_ms}"
        );
        // Retries of the first three find their tickets, over the limit, any number of times.
        for _ in 0..3 {
            for (i, first) in firsts.iter().enumerate() {
                let JoinReply::Joined(again) = join(format!("k:{i}"), "198.51.100.1").await else {
                    panic!("{kind}: a retried join was refused by the limit");
                };
                assert!(!again.created, "{kind}");
                assert_eq!(&again.ticket.id, first, "{kind}");
            }
        }
        // Another client has its own allowance; the refused join left nothing behind.
        assert!(matches!(
            join("k:other".into(), "198.51.100.2").await,
            JoinReply::Joined(_)
        ));
        assert_eq!(
            store.counts(room_id(ROOM), now_ms()).await.unwrap().waiting,
            4,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn settings_changes_are_versioned_and_a_stale_if_match_changes_nothing() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let start = store.room_settings(ROOM).await.unwrap();
        assert_eq!(start.settings, defaults(), "{kind}");
        let rate = |rate: f64| SettingsPatch {
            admission_rate_per_sec: Some(rate),
            ..SettingsPatch::default()
        };
        let SettingsUpdate::Applied(first) = support::change(&*store, ROOM, &rate(7.0), None)
            .await
            .unwrap()
        else {
            panic!("{kind}: an unconditional change was refused");
        };
        assert_eq!(first.version, start.version + 1, "{kind}");
        assert_eq!(first.settings.admission_rate_per_sec, 7.0, "{kind}");
        // A change conditional on the version before the first one is refused whole.
        let stale = support::change(&*store, ROOM, &rate(9.0), Some(start.version))
            .await
            .unwrap();
        assert_eq!(
            stale,
            SettingsUpdate::VersionMismatch(first.clone()),
            "{kind}"
        );
        let SettingsUpdate::Applied(second) =
            support::change(&*store, ROOM, &rate(9.0), Some(first.version))
                .await
                .unwrap()
        else {
            panic!("{kind}: a current If-Match was refused");
        };
        assert_eq!(second.version, first.version + 1, "{kind}");
        assert_eq!(store.room_settings(ROOM).await.unwrap(), second, "{kind}");
    }
}

/// A join decided on an old settings version changes nothing and says so (another replica
/// changed the settings since this one read them); on the current version it joins.
#[tokio::test]
async fn a_join_decided_on_old_settings_changes_nothing() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let start = store.room_settings(ROOM).await.unwrap();
        let patch = SettingsPatch {
            paused: Some(true),
            ..SettingsPatch::default()
        };
        let SettingsUpdate::Applied(now) =
            support::change(&*store, ROOM, &patch, None).await.unwrap()
        else {
            panic!("{kind}: an unconditional change was refused");
        };
        let instant = |version| vestibule_store::InstantAdmission {
            token: entry_token(ROOM),
            now_ms: now_ms(),
            token_ttl_ms: 60_000,
            settings_version: Some(version),
        };
        let id = random_id();
        let join = |kind| JoinRequest::new(&id).keyed(Some("k")).of_kind(kind);
        let old = instant(start.version);
        let stale = store
            .join(room_id(ROOM), &join(JoinKind::Admitting(&old)))
            .await
            .unwrap();
        assert_eq!(stale, JoinReply::SettingsChanged, "{kind}");
        let prequeue = JoinKind::PreQueue {
            settings_version: Some(start.version),
        };
        let stale = store.join(room_id(ROOM), &join(prequeue)).await.unwrap();
        assert_eq!(stale, JoinReply::SettingsChanged, "{kind}");
        assert_eq!(
            store.counts(room_id(ROOM), now_ms()).await.unwrap().waiting,
            0,
            "{kind}"
        );
        let fresh = instant(now.version);
        let current = store
            .join(room_id(ROOM), &join(JoinKind::Admitting(&fresh)))
            .await
            .unwrap();
        let JoinReply::Joined(outcome) = current else {
            panic!("{kind}: a current join was refused: {current:?}");
        };
        assert!(outcome.created, "{kind}");
        assert_eq!(outcome.ticket.position, Some(1), "{kind}");
    }
}

/// The embedding settings of a room go through every store: set, kept by a change of another field,
/// cleared back to none (`Some(None)`), and seen by the scheduler's tick (the admit step
/// returns the settings in force).
#[tokio::test]
async fn embedding_settings_are_kept_changed_and_cleared() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let set = SettingsPatch {
            checkout_url: Some(Some("/buy?step=2".into())),
            share_token_with_embedder: Some(true),
            ..SettingsPatch::default()
        };
        let SettingsUpdate::Applied(changed) =
            support::change(&*store, ROOM, &set, None).await.unwrap()
        else {
            panic!("{kind}: refused");
        };
        assert_eq!(
            changed.settings.checkout_url.as_deref(),
            Some("/buy?step=2"),
            "{kind}"
        );
        assert!(changed.settings.share_token_with_embedder, "{kind}");
        let rate = SettingsPatch {
            admission_rate_per_sec: Some(3.0),
            ..SettingsPatch::default()
        };
        support::change(&*store, ROOM, &rate, None).await.unwrap();
        let read = store.room_settings(ROOM).await.unwrap().settings;
        assert_eq!(read.checkout_url.as_deref(), Some("/buy?step=2"), "{kind}");
        assert!(read.share_token_with_embedder, "{kind}");
        let epoch = lead(store.as_ref(), "a").await;
        let tick = store
            .admit(
                room_id(ROOM),
                &AdmitRequest {
                    holder: "a",
                    epoch,
                    now_ms: now_ms(),
                    token_ttl_ms: 1_000,
                    max_active_users: None,
                    tokens: &[],
                    abandon_after_ms: u64::MAX / 2,
                    hold_place_ms: 0,
                    instant_bank_max: 0,
                    pace: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(
            tick.settings.map(|s| s.settings),
            Some(read.clone()),
            "{kind}"
        );
        let clear = SettingsPatch {
            checkout_url: Some(None),
            share_token_with_embedder: Some(false),
            ..SettingsPatch::default()
        };
        let SettingsUpdate::Applied(cleared) =
            support::change(&*store, ROOM, &clear, None).await.unwrap()
        else {
            panic!("{kind}: refused");
        };
        assert_eq!(cleared.settings.checkout_url, None, "{kind}");
        assert!(!cleared.settings.share_token_with_embedder, "{kind}");
    }
}

#[tokio::test]
async fn expired_tokens_are_refused_and_free_their_active_slot() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let id = random_id();
        store.join_line(room_id(ROOM), None, &id).await.unwrap();
        let epoch = lead(store.as_ref(), "a").await;
        assert_eq!(admit(store.as_ref(), "a", epoch, 1, 1).await, 1);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let ticket = store
            .ticket(room_id(ROOM), &id, now_ms())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ticket.state, TicketState::Expired, "{kind}");
        assert_eq!(ticket.entry_token, None);
        // The next tick sweeps it out of the active set.
        admit(store.as_ref(), "a", epoch, 0, 1).await;
        assert_eq!(
            store.counts(room_id(ROOM), now_ms()).await.unwrap().active,
            0,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn the_active_users_cap_holds_admission_back() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        for _ in 0..10 {
            store
                .join_line(room_id(ROOM), None, &random_id())
                .await
                .unwrap();
        }
        let epoch = lead(store.as_ref(), "a").await;
        let tokens: Vec<String> = (0..10).map(|_| entry_token(ROOM)).collect();
        let outcome = store
            .admit(
                room_id(ROOM),
                &AdmitRequest {
                    holder: "a",
                    epoch,
                    now_ms: now_ms(),
                    token_ttl_ms: 60_000,
                    max_active_users: Some(3),
                    tokens: &tokens,
                    abandon_after_ms: u64::MAX / 2,
                    hold_place_ms: 0,
                    instant_bank_max: 0,
                    pace: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(
            (outcome.admitted, outcome.active, outcome.waiting),
            (3, 3, 7),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn sse_cursors_replay_admissions_and_leaves_exactly() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let mut ids = Vec::new();
        for _ in 0..6 {
            let id = random_id();
            store.join_line(room_id(ROOM), None, &id).await.unwrap();
            ids.push(id);
        }
        let first = store
            .sse_refresh(room_id(ROOM), None, &ids[5..], now_ms())
            .await
            .unwrap();
        assert_eq!(first.delta, None, "{kind}: no cursor yet");
        let (record, seq) = first.tickets[0].clone().unwrap();
        assert_eq!(record.position, Some(6), "{kind}");
        let seq = seq.expect("a waiting ticket has a seq");

        store.leave(room_id(ROOM), &ids[3], now_ms()).await.unwrap();
        let epoch = lead(store.as_ref(), "a").await;
        assert_eq!(admit(store.as_ref(), "a", epoch, 2, 60_000).await, 2);
        let next = store
            .sse_refresh(room_id(ROOM), Some(first.cursor), &[], now_ms())
            .await
            .unwrap();
        let delta = next.delta.expect("the cursor can be followed");
        assert_eq!(delta.popped, 2, "{kind}");
        assert_eq!(delta.left_seqs.len(), 1, "{kind}");
        let ahead_left = delta.left_seqs.iter().filter(|left| **left < seq).count() as u64;
        let moved = 6 - delta.popped - ahead_left;
        let exact = store
            .ticket(room_id(ROOM), &ids[5], now_ms())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            exact.position,
            Some(moved),
            "{kind}: the replayed position is the exact one"
        );

        // A cursor from the future (an emptied store) cannot be followed.
        let ahead = vestibule_store::QueueCursor {
            popped: 1_000,
            left: 0,
        };
        let reset = store
            .sse_refresh(room_id(ROOM), Some(ahead), &[], now_ms())
            .await
            .unwrap();
        assert_eq!(reset.delta, None, "{kind}");
    }
}

/// One step of a random sale.
#[derive(Debug, Clone)]
enum Step {
    Join,
    Leave(usize),
    Admit(usize),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            5 => Just(Step::Join),
            1 => any::<usize>().prop_map(Step::Leave),
            2 => (0usize..6).prop_map(Step::Admit),
        ],
        1..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    // Under any mix of joins, leaves and admissions, on both stores: waiting positions are a
    // permutation of 1..=N in arrival order, admission follows arrival order, every ticket is
    // admitted at most once, and tokens are all distinct.
    #[test]
    fn random_sales_keep_fifo_order_and_admit_each_ticket_at_most_once(plan in steps()) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            for (store, _redis, _dir) in stores().await {
                let kind = store.kind();
                let epoch = lead(store.as_ref(), "a").await;
                let mut arrivals: Vec<String> = Vec::new();
                let mut admitted_order: Vec<String> = Vec::new();
                let mut seen_tokens = HashSet::new();
                for step in &plan {
                    match step {
                        Step::Join => {
                            let id = random_id();
                            store.join_line(room_id(ROOM), None, &id).await.unwrap();
                            arrivals.push(id);
                        }
                        Step::Leave(pick) if !arrivals.is_empty() => {
                            let id = &arrivals[pick % arrivals.len()];
                            store.leave(room_id(ROOM), id, now_ms()).await.unwrap();
                        }
                        Step::Leave(_) => {}
                        Step::Admit(count) => {
                            let before: Vec<_> = read_all(store.as_ref(), &arrivals).await;
                            admit(store.as_ref(), "a", epoch, *count, 60_000).await;
                            let after = read_all(store.as_ref(), &arrivals).await;
                            for ((id, b), a) in arrivals.iter().zip(before).zip(after) {
                                let (b, a) = (b.unwrap(), a.unwrap());
                                if b.state == TicketState::Waiting && a.state == TicketState::TokenIssued {
                                    admitted_order.push(id.clone());
                                    prop_assert!(seen_tokens.insert(a.entry_token.clone().unwrap()), "{} token reused", kind);
                                }
                                prop_assert!(!(b.state == TicketState::TokenIssued && a.state == TicketState::Waiting));
                            }
                        }
                    }
                }
                // FIFO: admitted tickets appear in arrival order, and none twice.
                let rank: std::collections::HashMap<&String, usize> =
                    arrivals.iter().enumerate().map(|(i, id)| (id, i)).collect();
                let order: Vec<usize> = admitted_order.iter().map(|id| rank[id]).collect();
                prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "{}: {:?}", kind, order);
                // Waiting positions are 1..=N in arrival order.
                let records = read_all(store.as_ref(), &arrivals).await;
                let positions: Vec<u64> = records.iter().flatten().filter_map(|r| r.position).collect();
                prop_assert_eq!(positions, (1..=store.counts(room_id(ROOM), now_ms()).await.unwrap().waiting).collect::<Vec<_>>(), "{}", kind);
            }
            Ok(())
        })?;
    }
}
