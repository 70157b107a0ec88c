//! The store contract of bots at the door, beside `store_contract.rs`: the same checks
//! against `MemoryStore`, `DurableStore` and `RedisStore` — the proof-of-work and user-assertion
//! settings are kept, changed and read by every path (admin read, lease, admission tick), and a
//! challenge is used once (across replicas on Redis: one `SET NX PX`).

use vestibule_store::redis::RedisStore;
use vestibule_store::{now_ms, AdmitRequest, Queue, Settings, SettingsPatch, SettingsUpdate};
use vestibule_tests::RedisServer;

mod support;

use support::defaults;
use support::room_id;

const ROOM: &str = "main";

/// Each store with its rooms initialised to [`defaults`].
async fn stores() -> Vec<support::UnderTest> {
    support::stores(&[ROOM, "other"], &defaults()).await
}

#[tokio::test]
async fn bot_settings_are_kept_changed_cleared_and_read_by_every_path() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let initial = store.room_settings(ROOM).await.unwrap().settings;
        assert_eq!(initial, defaults(), "{kind}");
        let set = SettingsPatch {
            pow_difficulty: Some(18),
            pow_auto_joins_per_sec: Some(Some(250)),
            require_user_assertion: Some(true),
            ..SettingsPatch::default()
        };
        let SettingsUpdate::Applied(changed) =
            support::change(&*store, ROOM, &set, None).await.unwrap()
        else {
            panic!("{kind}: refused");
        };
        let expected = Settings {
            pow_difficulty: 18,
            pow_auto_joins_per_sec: Some(250),
            require_user_assertion: true,
            ..defaults()
        };
        assert_eq!(changed.settings, expected, "{kind}");
        // Another field's change leaves them be.
        let rate = SettingsPatch {
            admission_rate_per_sec: Some(7.0),
            ..SettingsPatch::default()
        };
        support::change(&*store, ROOM, &rate, None).await.unwrap();
        let read = store.room_settings(ROOM).await.unwrap().settings;
        assert_eq!(read.pow_difficulty, 18, "{kind}");
        assert_eq!(read.pow_auto_joins_per_sec, Some(250), "{kind}");
        assert!(read.require_user_assertion, "{kind}");
        // The scheduler's reads (lease and tick) see the same.
        let lease = store.lease(room_id(ROOM), "a").await.unwrap();
        assert_eq!(lease.settings.settings, read, "{kind}");
        let tick = store
            .admit(
                room_id(ROOM),
                &AdmitRequest {
                    holder: "a",
                    epoch: lease.epoch.expect("leads"),
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
        assert_eq!(tick.settings.map(|s| s.settings), Some(read), "{kind}");
        let clear = SettingsPatch {
            pow_difficulty: Some(0),
            pow_auto_joins_per_sec: Some(None),
            require_user_assertion: Some(false),
            ..SettingsPatch::default()
        };
        let SettingsUpdate::Applied(cleared) =
            support::change(&*store, ROOM, &clear, None).await.unwrap()
        else {
            panic!("{kind}: refused");
        };
        assert_eq!(
            cleared.settings,
            Settings {
                admission_rate_per_sec: 7.0,
                ..defaults()
            },
            "{kind}"
        );
    }
}

#[tokio::test]
async fn a_challenge_is_used_once_per_room_even_when_raced() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let now = now_ms();
        let expires = now + 60_000;
        let races = (0..16).map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .use_challenge(room_id(ROOM), "id-1", expires, now)
                    .await
            })
        });
        let mut firsts = 0;
        for race in races {
            if race.await.unwrap().unwrap() {
                firsts += 1;
            }
        }
        assert_eq!(firsts, 1, "{kind}: exactly one use wins");
        assert!(
            store
                .use_challenge(room_id("other"), "id-1", expires, now)
                .await
                .unwrap(),
            "{kind}: rooms do not share challenges"
        );
        assert!(
            store
                .use_challenge(room_id(ROOM), "id-2", expires, now)
                .await
                .unwrap(),
            "{kind}"
        );
        assert!(
            !store
                .use_challenge(room_id(ROOM), "id-2", expires, now + 1)
                .await
                .unwrap(),
            "{kind}"
        );
    }
}

/// Two Redis stores (two replicas) on one server share the single use.
#[tokio::test]
async fn a_challenge_used_through_one_replica_is_used_for_the_other() {
    let redis = RedisServer::start();
    let url = redis.url();
    let connect = || RedisStore::connect(&url, std::time::Duration::from_secs(2));
    let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
    let now = now_ms();
    assert!(a
        .use_challenge(room_id(ROOM), "x", now + 1_000, now)
        .await
        .unwrap());
    assert!(!b
        .use_challenge(room_id(ROOM), "x", now + 1_000, now)
        .await
        .unwrap());
    // The mark expires with the challenge (plus a few seconds of clock slack), not later.
    let ttl = redis.cli(&["PTTL", "vestibule:{main}:pow:x"]);
    let ttl: i64 = ttl.trim().parse().unwrap();
    assert!((1..=7_000).contains(&ttl), "PTTL {ttl}");
}
