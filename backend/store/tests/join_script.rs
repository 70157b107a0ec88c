//! `join.lua` called directly on a real `redis-server`: what a call leaves behind when one of its
//! joins fails partway.
//!
//! A call reads the arrival-seq counter once and writes it (`INCRBY`) and the new tickets'
//! `seen:`/`born:` slots at its end. Redis keeps what a script wrote before an error, so the counter
//! and the slots are written whatever happens: a join failing after others of its call made
//! tickets would otherwise leave those tickets at seqs the counter never counted, and the next
//! join would reuse one.

use redis::AsyncCommands as _;
use vestibule_store::redis::{script_parts, RedisStore};
use vestibule_store::{Catalog, RoomId, Settings};
use vestibule_tests::RedisServer;

const ROOM: &str = "err1";

/// The room's first generation, the one [`created`] makes.
fn room() -> RoomId<'static> {
    RoomId::new(ROOM, 1)
}

fn prefix() -> String {
    format!("vestibule:{{{ROOM}}}:g1:")
}

/// Creates the room in `redis` (its document), as the server does before any join.
async fn created(redis: &RedisServer) {
    let store = RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let settings: Settings = serde_json::from_value(
        serde_json::json!({"admissionRatePerSec": 1.0, "paused": true, "tokenTtlMs": 300000}),
    )
    .unwrap();
    let created = store.seed_room(ROOM, &settings).await.unwrap();
    assert_eq!(created.generation, room().generation);
}

/// One join's 13 arguments: a fresh `id`, a dedup `key` and its `derived` id (both "" for none);
/// no join limit, no instant admission, an ordinary join decided on any settings version.
fn join_args(id: &str, key: &str, derived: &str) -> Vec<String> {
    [
        id, key, derived, "", "0", "0", "", "300000", "3600000", "0", "", "", "",
    ]
    .map(str::to_owned)
    .to_vec()
}

async fn call(
    connection: &mut redis::aio::MultiplexedConnection,
    joins: &[Vec<String>],
) -> redis::RedisResult<String> {
    let (source, keys) = script_parts("join", room()).expect("join.lua");
    let script = redis::Script::new(&source);
    let mut invocation = script.prepare_invoke();
    for key in keys {
        invocation.key(key);
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    invocation
        .arg(room().generation)
        .arg(prefix())
        .arg(86_400)
        .arg(now_ms);
    for join in joins {
        for arg in join {
            invocation.arg(arg);
        }
    }
    invocation.invoke_async(connection).await
}

/// The u32 big-endian slot of `seq` in a `seen:` or `born:` chunk (0 when unwritten).
async fn slot(connection: &mut redis::aio::MultiplexedConnection, what: &str, seq: u64) -> u32 {
    let key = format!("{}{what}:{}", prefix(), seq / 65_536);
    let offset = (seq % 65_536) * 4;
    let bytes: Vec<u8> = connection
        .getrange(&key, offset as isize, offset as isize + 3)
        .await
        .unwrap();
    if bytes.len() < 4 {
        return 0;
    }
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// A connection of its own to `redis`.
async fn connect(redis: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_join_failing_partway_leaves_the_tickets_before_it_counted_and_heard() {
    let redis = RedisServer::start();
    created(&redis).await;
    let mut connection = connect(&redis).await;
    // The second join's ticket key holds a string: its state read answers WRONGTYPE.
    let _: () = connection
        .set(format!("{}ticket:derived-two", prefix()), "corrupt")
        .await
        .unwrap();

    let failed = call(
        &mut connection,
        &[
            join_args("ticket-one", "", ""),
            join_args("ticket-two", "k:two", "derived-two"),
            join_args("ticket-three", "", ""),
        ],
    )
    .await;
    let error = failed.expect_err("the corrupt ticket key fails the call");
    assert!(
        error.to_string().contains("WRONGTYPE"),
        "the command's own error comes back: {error}"
    );

    // The first join made its ticket before the failure: its seq is counted and its slots say
    // when it joined and was last heard from.
    let queue: Vec<(String, f64)> = connection
        .zrange_withscores(format!("{}queue", prefix()), 0, -1)
        .await
        .unwrap();
    assert_eq!(queue, vec![("ticket-one".to_owned(), 1.0)]);
    let counter: u64 = connection.get(format!("{}seq", prefix())).await.unwrap();
    assert_eq!(counter, 1, "the counter counts the ticket made");
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    for what in ["seen", "born"] {
        let at = slot(&mut connection, what, 1).await;
        assert!(
            at.abs_diff(now_s) <= 5,
            "{what} slot of seq 1 is now ({now_s}), not {at}"
        );
    }

    // The next join takes the next seq: no two tickets share one.
    let answer = call(&mut connection, &[join_args("ticket-four", "", "")])
        .await
        .unwrap();
    assert_eq!(
        answer, "waiting ticket-four 1 2",
        "a new ticket, second in line"
    );
    let queue: Vec<(String, f64)> = connection
        .zrange_withscores(format!("{}queue", prefix()), 0, -1)
        .await
        .unwrap();
    assert_eq!(
        queue,
        vec![
            ("ticket-one".to_owned(), 1.0),
            ("ticket-four".to_owned(), 2.0)
        ]
    );
    assert_ne!(slot(&mut connection, "born", 2).await, 0);
}

/// A call's seqs that cross a `seen:`/`born:` chunk boundary are written into both chunks, each
/// slot where `BITFIELD … u32 #slot` would put it.
#[tokio::test]
async fn a_call_across_a_chunk_boundary_writes_both_chunks() {
    let redis = RedisServer::start();
    created(&redis).await;
    let mut connection = connect(&redis).await;
    let _: () = connection
        .set(format!("{}seq", prefix()), 65_533)
        .await
        .unwrap();
    let joins: Vec<Vec<String>> = (0..6)
        .map(|n| join_args(&format!("ticket-{n}"), "", ""))
        .collect();
    let answer = call(&mut connection, &joins).await.unwrap();
    assert_eq!(answer.lines().count(), 6, "{answer}");
    let counter: u64 = connection.get(format!("{}seq", prefix())).await.unwrap();
    assert_eq!(counter, 65_539);
    for seq in 65_534..=65_539 {
        for what in ["seen", "born"] {
            let by_range = slot(&mut connection, what, seq).await;
            let key = format!("{}{what}:{}", prefix(), seq / 65_536);
            let by_bitfield: Vec<u32> = redis::cmd("BITFIELD")
                .arg(&key)
                .arg("GET")
                .arg("u32")
                .arg(format!("#{}", seq % 65_536))
                .query_async(&mut connection)
                .await
                .unwrap();
            assert_ne!(by_range, 0, "{what} of seq {seq}");
            assert_eq!(by_bitfield, vec![by_range], "{what} of seq {seq}");
        }
    }
    // Nothing past the last seq of the call.
    assert_eq!(slot(&mut connection, "born", 65_540).await, 0);
}
