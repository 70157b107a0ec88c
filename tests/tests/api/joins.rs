//! Joining and leaving: positions in arrival order, retried joins keep their place (also when
//! their copies race), leaves move the line up.

use crate::paused_app;
use futures_util::future::join_all;
use reqwest::StatusCode;
use std::collections::HashSet;
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend};

both_stores!(
    joins_get_positions_in_arrival_order_and_rejoins_keep_their_place,
    concurrent_joins_get_every_position_exactly_once,
    concurrent_copies_of_one_keyed_join_leave_one_place,
    leaving_moves_everyone_behind_up_by_one,
    the_hot_routes_answer_as_the_router_does,
);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(
    joins_get_positions_in_arrival_order_and_rejoins_keep_their_place,
    concurrent_joins_get_every_position_exactly_once,
    leaving_moves_everyone_behind_up_by_one,
);

async fn joins_get_positions_in_arrival_order_and_rejoins_keep_their_place(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let mut tickets = Vec::new();
    for i in 0..30 {
        let (status, ticket) = app.join("main", Some(&format!("key-{i}"))).await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(ticket.position, Some(i + 1));
        assert_eq!(ticket.status, TicketState::Waiting);
        tickets.push(ticket);
    }
    let (status, again) = app.join("main", Some("key-7")).await;
    assert_eq!(status, StatusCode::OK, "a retried join is not a new ticket");
    assert_eq!(again.ticket_id, tickets[7].ticket_id);
    assert_eq!(again.position, Some(8));
    // Polls agree with the join answers.
    for ticket in tickets.iter().step_by(7) {
        let polled = app.poll("main", &ticket.ticket_id).await;
        assert_eq!(polled.position, ticket.position);
    }
    // A join without a key is always a new shopper.
    let (status, fresh) = app.join("main", None).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(fresh.position, Some(31));
}

async fn concurrent_joins_get_every_position_exactly_once(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let joins = (0..500).map(|i| {
        let app = &app;
        async move { app.join("main", Some(&format!("c-{i}"))).await.1 }
    });
    let tickets: Vec<TicketStatus> = join_all(joins).await;
    let mut positions: Vec<u64> = tickets.iter().map(|t| t.position.unwrap()).collect();
    positions.sort_unstable();
    assert_eq!(positions, (1..=500).collect::<Vec<_>>());
    let ids: HashSet<_> = tickets.iter().map(|t| t.ticket_id.clone()).collect();
    assert_eq!(ids.len(), 500);
    let info = app.get_json(&paths::room("main")).await.1;
    assert_eq!(info["waiting"], 500);
}

// Redis's group commit (backend/src/store/redis/group_commit.rs): many joins of one room at once
// go to Redis several per `join.lua` call. The embedded stores have no calls to group.
mod sent_together {
    use vestibule_tests::Backend;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_redis_store() {
        super::joins_sent_together_keep_every_guarantee(Backend::Redis).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_redis_cluster() {
        super::joins_sent_together_keep_every_guarantee(Backend::RedisCluster).await;
    }
}

/// 150 keys each sent twice at once and 150 joins without a key, all at the same time: every
/// key makes one ticket (one answer 201, the other 200 with the same id and position), the 300
/// tickets hold the positions 1…300 once each, and the joins really went several per call.
async fn joins_sent_together_keep_every_guarantee(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let calls_before = app.metric("vestibule_redis_join_calls_total").await;
    let sent_before = app.metric("vestibule_redis_joins_sent_total").await;
    let keyed = (0..300).map(|i| {
        let app = &app;
        async move { app.join("main", Some(&format!("twice-{}", i / 2))).await }
    });
    let keyless = (0..150).map(|_| {
        let app = &app;
        async move { app.join("main", None).await }
    });
    let (keyed, keyless) = futures_util::join!(join_all(keyed), join_all(keyless));
    let mut positions = Vec::new();
    for pair in keyed.chunks_exact(2) {
        let [(first_status, first), (second_status, second)] = pair else {
            unreachable!()
        };
        assert_eq!(first.ticket_id, second.ticket_id, "one ticket per key");
        assert_eq!(first.position, second.position);
        let mut statuses = [*first_status, *second_status];
        statuses.sort_unstable();
        assert_eq!(statuses, [StatusCode::OK, StatusCode::CREATED]);
        positions.push(first.position.unwrap());
    }
    for (status, ticket) in &keyless {
        assert_eq!(*status, StatusCode::CREATED);
        positions.push(ticket.position.unwrap());
    }
    positions.sort_unstable();
    assert_eq!(positions, (1..=300).collect::<Vec<_>>());
    let info = app.get_json(&paths::room("main")).await.1;
    assert_eq!(info["waiting"], 300);
    let calls = app.metric("vestibule_redis_join_calls_total").await - calls_before;
    let sent = app.metric("vestibule_redis_joins_sent_total").await - sent_before;
    assert_eq!(sent, 450.0, "each join sent once");
    assert!(
        calls < sent,
        "450 joins at once went in {calls} calls: none went together"
    );

    // Every keyed ticket leaves, and its key joins again, twice at once: a re-join after LEFT
    // takes a fresh id, remembered in the dedup hash, which did not exist before this batch;
    // the second join of a key (often in the same call) must find it there, not make another.
    let left: Vec<_> = keyed.iter().step_by(2).map(|(_, t)| t.clone()).collect();
    for ticket in &left {
        assert_eq!(
            app.leave("main", &ticket.ticket_id).await,
            StatusCode::NO_CONTENT
        );
    }
    let again = (0..300).map(|i| {
        let app = &app;
        async move { app.join("main", Some(&format!("twice-{}", i / 2))).await }
    });
    let again = join_all(again).await;
    let mut positions = Vec::new();
    for (pair, old) in again.chunks_exact(2).zip(&left) {
        let [(first_status, first), (second_status, second)] = pair else {
            unreachable!()
        };
        assert_eq!(first.ticket_id, second.ticket_id, "one new ticket per key");
        assert_ne!(first.ticket_id, old.ticket_id, "a fresh id after LEFT");
        let mut statuses = [*first_status, *second_status];
        statuses.sort_unstable();
        assert_eq!(statuses, [StatusCode::OK, StatusCode::CREATED]);
        positions.push(first.position.unwrap());
    }
    positions.sort_unstable();
    assert_eq!(positions, (151..=300).collect::<Vec<_>>());
    let info = app.get_json(&paths::room("main")).await.1;
    assert_eq!(info["waiting"], 300);
}

/// Sixteen copies of one keyed join at once (the page's retry racing its first try on a flaky
/// network) leave one place in the queue, and every copy names that one ticket.
// Report: jcagarcia/grape-idempotency#10 (a retry racing its first try ran the operation twice).
async fn concurrent_copies_of_one_keyed_join_leave_one_place(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let answers = join_all((0..16).map(|_| app.join("main", Some("flaky-network-1")))).await;
    let ids: std::collections::BTreeSet<&str> =
        answers.iter().map(|(_, t)| t.ticket_id.as_str()).collect();
    let statuses: Vec<u16> = answers.iter().map(|(s, _)| s.as_u16()).collect();
    println!("statuses {statuses:?}, ticket ids {ids:?}");
    assert_eq!(ids.len(), 1, "one key, several tickets: {ids:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 15);
    assert_eq!(app.get_json(&paths::room("main")).await.1["waiting"], 1);
}

async fn leaving_moves_everyone_behind_up_by_one(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let mut tickets = Vec::new();
    for _ in 0..6 {
        tickets.push(app.join("main", None).await.1);
    }
    assert_eq!(
        app.leave("main", &tickets[1].ticket_id).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.poll("main", &tickets[0].ticket_id).await.position,
        Some(1)
    );
    for (i, ticket) in tickets.iter().enumerate().skip(2) {
        assert_eq!(
            app.poll("main", &ticket.ticket_id).await.position,
            Some(i as u64)
        );
    }
    let left = app.poll("main", &tickets[1].ticket_id).await;
    assert_eq!(left.status, TicketState::Left);
    assert_eq!(left.position, None);
    // Leaving twice is fine; an unknown ticket is 404.
    assert_eq!(
        app.leave("main", &tickets[1].ticket_id).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.leave("main", "AAAAAAAAAAAAAAAAAAAAAA").await,
        StatusCode::NOT_FOUND
    );
}

/// A poll and a join are called without the router (`http::edge::hot_route`); the same request
/// with a percent-encoded room (`m%61in` is `main`) still goes through the router. Both must
/// answer alike: status, body and header names (`date` aside), for a join, a repeated join, a
/// poll, and the handlers' own errors.
async fn the_hot_routes_answer_as_the_router_does(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let encoded = "m%61in";
    async fn answer(
        request: reqwest::RequestBuilder,
    ) -> (
        StatusCode,
        std::collections::BTreeSet<String>,
        serde_json::Value,
    ) {
        let response = request.send().await.expect("request");
        let status = response.status();
        let names = response
            .headers()
            .keys()
            .map(|name| name.as_str().to_owned())
            .filter(|name| name != "date")
            .collect();
        let body = response.json().await.expect("a JSON body");
        (status, names, body)
    }
    let join = |room: &str, key: &str| {
        app.client
            .post(app.url(&paths::tickets(room)))
            .header("Idempotency-Key", key)
    };
    // The first join through one, the repeat through the other, both ways round.
    let (hot_status, hot_names, hot_body) = answer(join("main", "hot-first")).await;
    let (routed_status, routed_names, routed_body) = answer(join(encoded, "hot-first")).await;
    assert_eq!(
        (hot_status, routed_status),
        (StatusCode::CREATED, StatusCode::OK)
    );
    assert_eq!(hot_names, routed_names);
    assert_eq!(hot_body, routed_body, "the same ticket, the same place");
    let (routed_status, routed_names, routed_body) = answer(join(encoded, "routed-first")).await;
    let (hot_status, hot_names, hot_body) = answer(join("main", "routed-first")).await;
    assert_eq!(
        (routed_status, hot_status),
        (StatusCode::CREATED, StatusCode::OK)
    );
    assert_eq!(hot_names, routed_names);
    assert_eq!(hot_body, routed_body);
    assert_eq!(hot_body["position"], 2);

    let ticket_id = hot_body["ticketId"]
        .as_str()
        .expect("a ticket id")
        .to_owned();
    let poll =
        |room: &str, ticket_id: &str| app.client.get(app.url(&paths::ticket(room, ticket_id)));
    let cases = [
        (ticket_id.as_str(), StatusCode::OK),
        ("not-an-id", StatusCode::BAD_REQUEST),
        ("Zb3n0W6m1q8VqL2pX9cT4A", StatusCode::NOT_FOUND),
    ];
    for (id, expected) in cases {
        let hot = answer(poll("main", id)).await;
        let routed = answer(poll(encoded, id)).await;
        assert_eq!(hot.0, expected, "{id}: {:?}", hot.2);
        assert_eq!(hot, routed, "{id}");
    }
    // An unknown room: the same 404 both ways, for a poll and a join.
    let hot = answer(poll("nowhere", &ticket_id)).await;
    let routed = answer(poll("n%6Fwhere", &ticket_id)).await;
    assert_eq!(hot.0, StatusCode::NOT_FOUND);
    assert_eq!(hot, routed);
    let hot = answer(join("nowhere", "k")).await;
    let routed = answer(join("n%6Fwhere", "k")).await;
    assert_eq!(hot.0, StatusCode::NOT_FOUND);
    assert_eq!(hot, routed);
}
