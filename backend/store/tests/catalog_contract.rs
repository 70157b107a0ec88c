//! The store contract of rooms at run time (docs/DESIGN.md "Rooms at run time"),
//! against `MemoryStore`, `DurableStore` (a temp data dir) and `RedisStore` (a private
//! `redis-server`): rooms are listed sorted, a create writes every setting (labels included) and
//! is refused for a room that exists, a delete is refused while tickets wait unless forced and
//! then ends them, the audit log is newest first and bounded by `limit`, the waiters list pages
//! the line in queue order with join and last-heard times, and the labels survive a patch.

use vestibule_store::durable::{DurableOptions, DurableStore};
use vestibule_store::ids::random_id;
use vestibule_store::{
    now_ms, AuditRecord, Catalog, LabelsPatch, RoomDeletion, RoomDoc, RoomId, RoomLabels, Settings,
    SettingsPatch, SettingsUpdate,
};

mod support;
use support::JoinLine;

use support::room_id;

fn defaults() -> Settings {
    Settings {
        paused: true,
        ..support::defaults()
    }
}

fn labelled() -> Settings {
    Settings {
        admission_rate_per_sec: 7.5,
        labels: RoomLabels {
            display_name_en: Some("Drop 7".into()),
            display_name_ko: Some("드롭 7".into()),
            message_en: Some("Sizes 42–44 are sold out".into()),
            message_ko: None,
        },
        ..defaults()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rooms_are_created_listed_and_deleted() {
    for (store, _redis, _dir) in support::stores(&["main"], &defaults()).await {
        let kind = store.kind();
        let created = store
            .create_room("drop-7", &labelled())
            .await
            .unwrap()
            .expect("a new room");
        assert_eq!(created.settings, labelled(), "{kind}");
        assert_eq!(
            store.room_settings("drop-7").await.unwrap().settings,
            labelled(),
            "{kind}"
        );
        assert_eq!(
            store.create_room("drop-7", &defaults()).await.unwrap(),
            None,
            "{kind}: a second create"
        );
        assert_eq!(
            store.create_room("main", &defaults()).await.unwrap(),
            None,
            "{kind}: a seeded room exists"
        );
        assert_eq!(
            store.list_rooms().await.unwrap(),
            ["drop-7", "main"],
            "{kind}"
        );
        // Not while someone waits; forced, every ticket goes with the room.
        store
            .join_line(room_id("drop-7"), None, &random_id())
            .await
            .unwrap();
        let now = now_ms();
        assert_eq!(
            store
                .delete_room(room_id("drop-7"), false, now)
                .await
                .unwrap(),
            RoomDeletion::NotEmpty {
                waiting: 1,
                active: 0
            },
            "{kind}"
        );
        assert_eq!(
            store
                .delete_room(room_id("drop-7"), true, now)
                .await
                .unwrap(),
            RoomDeletion::Deleted { ended: 1 },
            "{kind}"
        );
        assert_eq!(store.list_rooms().await.unwrap(), ["main"], "{kind}");
        assert_eq!(
            store.room_doc("drop-7").await.unwrap(),
            Some(RoomDoc::Deleted { generation: 1 }),
            "{kind}"
        );
        assert_eq!(
            store
                .delete_room(room_id("drop-7"), true, now)
                .await
                .unwrap(),
            RoomDeletion::NotFound,
            "{kind}"
        );
        // The slug again: an empty room with the new settings, no longer deleted, a later
        // generation whose first version is above every version of the deleted one.
        let again = store
            .create_room("drop-7", &defaults())
            .await
            .unwrap()
            .expect("created again");
        assert!(again.generation > 1, "{kind}: {again:?}");
        assert!(again.version > created.version, "{kind}: {again:?}");
        let again = RoomId::new("drop-7", again.generation);
        assert_eq!(
            store.counts(again, now_ms()).await.unwrap().waiting,
            0,
            "{kind}"
        );
        assert_eq!(
            store.room_settings("drop-7").await.unwrap().settings,
            defaults(),
            "{kind}"
        );
        assert!(
            matches!(
                store.room_doc("drop-7").await.unwrap(),
                Some(RoomDoc::Live(_))
            ),
            "{kind}"
        );
        // The deleted generation takes nothing any more.
        assert!(
            matches!(
                store.join_line(room_id("drop-7"), None, &random_id()).await,
                Err(vestibule_store::StoreError::RoomGone(_))
            ),
            "{kind}"
        );
        // An empty room is deleted without force.
        assert_eq!(
            store.delete_room(again, false, now_ms()).await.unwrap(),
            RoomDeletion::Deleted { ended: 0 },
            "{kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_are_patched_and_cleared_like_other_settings() {
    for (store, _redis, _dir) in support::stores(&["main"], &defaults()).await {
        let kind = store.kind();
        let patch = SettingsPatch {
            labels: LabelsPatch {
                message_en: Some(Some("back at 9".into())),
                message_ko: Some(Some("-".into())),
                display_name_ko: Some(Some("메인".into())),
                ..LabelsPatch::default()
            },
            ..SettingsPatch::default()
        };
        let SettingsUpdate::Applied(after) = support::change(&*store, "main", &patch, None)
            .await
            .unwrap()
        else {
            panic!("{kind}: not applied");
        };
        assert_eq!(
            after.settings.labels.message_en.as_deref(),
            Some("back at 9")
        );
        let clear = SettingsPatch {
            labels: LabelsPatch {
                message_en: Some(None),
                ..LabelsPatch::default()
            },
            ..SettingsPatch::default()
        };
        support::change(&*store, "main", &clear, None)
            .await
            .unwrap();
        let labels = store.room_settings("main").await.unwrap().settings.labels;
        assert_eq!(
            (labels.message_en, labels.display_name_ko.as_deref()),
            (None, Some("메인")),
            "{kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_is_newest_first_and_limited() {
    for (store, _redis, _dir) in support::stores(&["main"], &defaults()).await {
        let kind = store.kind();
        assert!(store.audit("main", 10).await.unwrap().is_empty(), "{kind}");
        let entry = |field: &str, new: i64| AuditRecord {
            id: String::new(),
            at_ms: now_ms(),
            field: field.into(),
            old: serde_json::Value::Null,
            new: new.into(),
            replica: "replica-a".into(),
        };
        let first = store
            .append_audit("main", &[entry("paused", 1), entry("tokenTtlSecs", 2)])
            .await
            .unwrap();
        let second = store
            .append_audit("main", &[entry("closed", 3)])
            .await
            .unwrap();
        assert_eq!((first.len(), second.len()), (2, 1), "{kind}");
        let log = store.audit("main", 100).await.unwrap();
        let fields: Vec<&str> = log.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["closed", "tokenTtlSecs", "paused"], "{kind}");
        assert_eq!(log[0].id, second[0], "{kind}");
        assert_eq!(
            (log[0].new.clone(), log[0].replica.as_str()),
            (3.into(), "replica-a")
        );
        assert_eq!(store.audit("main", 2).await.unwrap().len(), 2, "{kind}");
        assert!(store.audit("other", 5).await.unwrap().is_empty(), "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiters_list_pages_the_line_with_its_times() {
    for (store, _redis, _dir) in support::stores(&["main"], &defaults()).await {
        let kind = store.kind();
        let before = now_ms();
        let mut ids = Vec::new();
        for _ in 0..4 {
            let id = random_id();
            store.join_line(room_id("main"), None, &id).await.unwrap();
            ids.push(id);
        }
        store
            .leave(room_id("main"), &ids[1], now_ms())
            .await
            .unwrap();
        let page = store.waiters(room_id("main"), 1, 2).await.unwrap();
        assert_eq!(page.total, 3, "{kind}");
        let listed: Vec<(u64, &str)> = page
            .waiters
            .iter()
            .map(|w| (w.position, w.ticket_id.as_str()))
            .collect();
        assert_eq!(
            listed,
            [(2, ids[2].as_str()), (3, ids[3].as_str())],
            "{kind}"
        );
        for waiter in &page.waiters {
            // Redis keeps whole seconds.
            let joined = waiter.joined_ms.expect("a join time");
            assert!(
                joined + 1000 >= before && joined <= now_ms(),
                "{kind}: {waiter:?}"
            );
            assert!(waiter.seen_ms.is_some(), "{kind}: {waiter:?}");
        }
        assert!(
            store
                .waiters(room_id("main"), 3, 10)
                .await
                .unwrap()
                .waiters
                .is_empty(),
            "{kind}"
        );
    }
}

fn audit_entry(field: &str) -> AuditRecord {
    AuditRecord {
        id: String::new(),
        at_ms: now_ms(),
        field: field.into(),
        old: serde_json::Value::Null,
        new: true.into(),
        replica: "replica-a".into(),
    }
}

/// Created and deleted rooms and the audit log come back from the data dir as they were, from
/// the journal and from a snapshot; ids go on after the ones kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_durable_store_keeps_rooms_and_their_audit_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = {
        let store = DurableStore::open(dir.path(), DurableOptions::default()).expect("open");
        store.seed_room("main", &defaults()).await.unwrap();
        store.create_room("drop-7", &labelled()).await.unwrap();
        store.create_room("drop-8", &defaults()).await.unwrap();
        store
            .join_line(room_id("drop-8"), None, &random_id())
            .await
            .unwrap();
        store
            .delete_room(room_id("drop-8"), true, now_ms())
            .await
            .unwrap();
        store
            .append_audit("drop-8", &[audit_entry("paused"), audit_entry("room")])
            .await
            .unwrap()
    };
    for compact in [false, true] {
        let store = DurableStore::open(dir.path(), DurableOptions::default()).expect("reopen");
        assert_eq!(store.list_rooms().await.unwrap(), ["drop-7", "main"]);
        assert_eq!(
            store.room_settings("drop-7").await.unwrap().settings,
            labelled()
        );
        let log = store.audit("drop-8", 10).await.unwrap();
        let ids: Vec<&str> = log.iter().rev().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, first, "after a restart (snapshot: {compact})");
        if compact {
            let next = store
                .append_audit("main", &[audit_entry("closed")])
                .await
                .unwrap();
            assert!(
                !first.contains(&next[0]),
                "{next:?} repeats an id of {first:?}"
            );
        } else {
            store.compact().unwrap();
        }
    }
}
