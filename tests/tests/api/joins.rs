//! Joining and leaving: positions in arrival order, retried joins keep their place, leaves move
//! the line up.

use crate::paused_app;
use futures_util::future::join_all;
use reqwest::StatusCode;
use std::collections::HashSet;
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend};

both_stores!(
    joins_get_positions_in_arrival_order_and_rejoins_keep_their_place,
    concurrent_joins_get_every_position_exactly_once,
    leaving_moves_everyone_behind_up_by_one,
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
