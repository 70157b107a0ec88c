//! The store's Lua scripts run on their own, on a real `redis-server`, as the store builds them
//! (bindings and prelude included: `store::redis::script_parts`).
//!
//! docs/DESIGN.md "Rooms at run time": a script writes a room's keys only while the room's
//! document is live at the generation the call names. A replica that has not seen a deletion
//! yet (the document says deleted, the generation's keys not purged yet) writes nothing, so no
//! key of a dead generation is left behind a purge; with the document live, the same calls do
//! write (the checks are not vacuous).

use vestibule_store::redis::{script_parts, RedisStore};
use vestibule_store::{Catalog, RoomId, Settings};
use vestibule_tests::RedisServer;

const ROOM: &str = "main";
const NOW_MS: &str = "1800000000123";

/// The room's first generation, the one [`created`] makes.
fn room() -> RoomId<'static> {
    RoomId::new(ROOM, 1)
}

/// `vestibule:{main}:g1:` key `name`.
fn key(name: &str) -> String {
    format!("vestibule:{{{ROOM}}}:g1:{name}")
}

/// The generation's key prefix.
fn prefix() -> String {
    key("")
}

/// Creates the room (its document, generation 1), as the server does before any call.
async fn created(redis: &RedisServer) {
    let store = RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let settings: Settings = serde_json::from_value(
        serde_json::json!({"admissionRatePerSec": 1.0, "paused": false, "tokenTtlMs": 60000}),
    )
    .unwrap();
    assert_eq!(
        store.seed_room(ROOM, &settings).await.unwrap().generation,
        1
    );
}

/// Runs script `name` with `args` after its KEYS; answers `redis-cli`'s output.
fn run(redis: &RedisServer, name: &str, args: &[&str]) -> String {
    let (source, keys) = script_parts(name, room()).unwrap_or_else(|| panic!("{name}.lua"));
    let count = keys.len().to_string();
    let mut all = vec!["EVAL", source.as_str(), count.as_str()];
    all.extend(keys.iter().map(String::as_str));
    all.extend_from_slice(args);
    redis.cli(&all)
}

/// Every key of generation 1 with its value (`DUMP`), sorted.
fn generation_keys(redis: &RedisServer) -> Vec<(String, String)> {
    let mut keys: Vec<String> = redis
        .cli(&["--scan", "--pattern", &format!("{}*", prefix())])
        .lines()
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys.into_iter()
        .map(|name| {
            let value = redis.cli(&["DUMP", &name]);
            (name, value)
        })
        .collect()
}

/// The room's document says `state`.
fn set_state(redis: &RedisServer, state: &str) {
    redis.cli(&[
        "HSET",
        &format!("vestibule:{{{ROOM}}}:room"),
        "state",
        state,
    ]);
}

#[tokio::test]
async fn no_script_writes_a_deleted_generation_while_its_keys_are_purged() {
    let redis = RedisServer::start();
    created(&redis).await;
    // Mid-purge: the queue, a waiting ticket and one with its token, the lease still there.
    redis.cli(&["ZADD", &key("queue"), "5", "waiter", "6", "holder"]);
    redis.cli(&[
        "HSET",
        &key("ticket:holder"),
        "state",
        "TOKEN_ISSUED",
        "tok",
        "main.secret",
        "exp",
        "1900000000000",
    ]);
    redis.cli(&["SET", &key("token:secret"), "holder"]);
    redis.cli(&["SET", &key("leader"), "me"]);
    redis.cli(&["SET", &key("epoch"), "1"]);
    redis.cli(&["HSET", &key("draw"), "seed", "00"]);
    set_state(&redis, "deleted");
    let before = generation_keys(&redis);
    let prefix = prefix();
    let calls: Vec<(&str, Vec<&str>)> = vec![
        ("leave", vec!["1", "waiter", NOW_MS, "60000", &prefix]),
        ("leave", vec!["1", "holder", NOW_MS, "60000", &prefix]),
        (
            "token",
            vec!["1", "main.secret", NOW_MS, "1", "60000", &prefix, "", "{}"],
        ),
        (
            "admit",
            vec![
                "1", "me", "1", NOW_MS, "60000", "60000", "-1", &prefix, "3000", "30000", "60000",
                "10", "", "main.t1", "main.t2",
            ],
        ),
        (
            "draw",
            vec!["1", "me", "1", &prefix, NOW_MS, "1000", "3000"],
        ),
        ("lottery_file", vec!["1", "1", "waiter", "member-of-waiter"]),
        ("room_secret", vec!["1", "fresh", "86400"]),
        ("hear", vec!["1", &prefix, NOW_MS, "0", "waiter"]),
        ("hear", vec!["1", &prefix, NOW_MS, "3", "0", "1", "#5"]),
        ("lease", vec!["1", "other", "3000", "offer"]),
        ("draw_seed", vec!["1", "11"]),
        (
            "join",
            vec![
                "1", &prefix, "86400", NOW_MS, "fresh-id", "", "", "", "0", "0", "", "60000",
                "3600000", "0", "", "", "",
            ],
        ),
    ];
    for (name, args) in &calls {
        let answer = run(&redis, name, args);
        assert!(
            answer.contains("ROOM_GONE main"),
            "{name}.lua on a deleted generation: {answer:?}"
        );
        assert_eq!(
            generation_keys(&redis),
            before,
            "{name}.lua changed a key of a deleted generation"
        );
    }
    // Another generation live (the room created again) refuses the old one's calls just so.
    redis.cli(&[
        "HSET",
        &format!("vestibule:{{{ROOM}}}:room"),
        "gen",
        "2",
        "state",
        "live",
    ]);
    let answer = run(&redis, "leave", &["1", "waiter", NOW_MS, "60000", &prefix]);
    assert!(answer.contains("ROOM_GONE"), "{answer:?}");
    assert_eq!(generation_keys(&redis), before);

    // Live at generation 1, the same calls write (the checks above are not vacuous).
    redis.cli(&["HSET", &format!("vestibule:{{{ROOM}}}:room"), "gen", "1"]);
    redis.cli(&["DEL", &key("secret")]);
    assert_eq!(
        run(&redis, "room_secret", &["1", "fresh", "86400"]),
        "fresh"
    );
    let left = run(&redis, "leave", &["1", "waiter", NOW_MS, "60000", &prefix]);
    assert!(left.starts_with("LEFT"), "{left:?}");
    assert_eq!(redis.cli(&["EXISTS", &key("left")]), "1");
}

#[tokio::test]
async fn a_lost_document_refuses_every_call_until_it_is_written_back() {
    let redis = RedisServer::start();
    created(&redis).await;
    redis.cli(&["DEL", &format!("vestibule:{{{ROOM}}}:room")]);
    let answer = run(&redis, "lease", &["1", "me", "3000", ""]);
    assert!(answer.contains("ROOM_LOST main"), "{answer:?}");
    assert_eq!(redis.cli(&["EXISTS", &key("leader")]), "0");
}

/// Mode 3 of `hear.lua` (the batch of polls answered from memory): slots of two chunks written
/// by chunk; nothing written below `sweep_low` (a chunk `admit.lua` deleted would be made again,
/// and never deleted) nor when nobody waits.
#[tokio::test]
async fn the_heard_batch_writes_no_chunk_admit_deleted() {
    let redis = RedisServer::start();
    created(&redis).await;
    let prefix = prefix();
    let heard = |slots: &[&str]| {
        let mut args = vec!["1", prefix.as_str(), NOW_MS, "3"];
        args.extend_from_slice(slots);
        run(&redis, "hear", &args)
    };
    let slot = |chunk: u64, index: u64| {
        redis.cli(&[
            "BITFIELD",
            &key(&format!("seen:{chunk}")),
            "GET",
            "u32",
            &format!("#{index}"),
        ])
    };
    // Nobody waits: nothing is made.
    assert_eq!(heard(&["0", "1", "#5"]), "");
    assert_eq!(redis.cli(&["EXISTS", &key("seen:0")]), "0");
    // Somebody waits: two chunks, three slots.
    redis.cli(&["ZADD", &key("queue"), "65541", "someone"]);
    heard(&["0", "1", "#5", "1", "2", "#5", "#9"]);
    assert_eq!(slot(0, 5), "1800000000");
    assert_eq!(slot(1, 5), "1800000000");
    assert_eq!(slot(1, 9), "1800000000");
    assert_eq!(slot(1, 6), "0");
    // Chunk 0 deleted by admit.lua's sweep (sweep_low 1): written no more.
    redis.cli(&["DEL", &key("seen:0")]);
    redis.cli(&["SET", &key("sweep_low"), "1"]);
    heard(&["0", "1", "#7", "1", "1", "#6"]);
    assert_eq!(redis.cli(&["EXISTS", &key("seen:0")]), "0");
    assert_eq!(slot(1, 6), "1800000000");
    // A skipped ticket within its hold comes back to its place when heard from.
    redis.cli(&[
        "HSET",
        &key("ticket:held"),
        "state",
        "HELD",
        "seq",
        "65542",
        "exp",
        "1900000000000",
    ]);
    run(
        &redis,
        "hear",
        &["1", &prefix, NOW_MS, "0", "someone", "held"],
    );
    assert_eq!(redis.cli(&["ZSCORE", &key("queue"), "held"]), "65542");
}
