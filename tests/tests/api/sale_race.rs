//! The flash sale's last unit: 500 shoppers race for 100 units, admitted fast and
//! ordering from many concurrent clients, through two replicas on Redis (one process on the
//! embedded store). Exactly 100 orders succeed, no unit is sold twice or lost (sold + left =
//! the initial stock), and every other shopper ends SOLD_OUT.
//!
//! Admission never leaves more tokens out than units left (docs/DESIGN.md "Stock and sold
//! out"), so no admitted shopper meets a sold-out checkout here; an order refused 409 `sold_out`
//! would be counted and its ticket must then be TOKEN_ISSUED or EXPIRED, never COMPLETED.
//!
//! The failure this guards against, OriginProtocol/dshop#920: "some users were able to buy
//! items despite the inventory being sold out" during a flash NFT sale — an inventory check apart
//! from the purchase step. Here the unit is taken in the token's own store step.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{
    both_stores, on_redis_cluster_too, Backend, RedisCluster, RedisServer, TestApp,
};

both_stores!(five_hundred_shoppers_race_for_one_hundred_units,);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(five_hundred_shoppers_race_for_one_hundred_units,);

const SHOPPERS: usize = 500;
const UNITS: u64 = 100;

/// How one shopper's try ended.
#[derive(Debug)]
enum Ending {
    Bought(String),
    Refused(TicketState),
    SoldOut,
}

async fn poll(client: &reqwest::Client, base: &str, id: &str) -> Option<TicketStatus> {
    let response = client
        .get(format!("{base}{}", paths::ticket("main", id)))
        .send()
        .await
        .ok()?;
    response.json().await.ok()
}

async fn shop(apps: Arc<Vec<String>>, i: usize, ticket_id: String) -> Ending {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut turn = i;
    loop {
        assert!(Instant::now() < deadline, "shopper {i} never finished");
        turn += 1;
        let base = &apps[turn % apps.len()];
        let Some(status) = poll(&client, base, &ticket_id).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        match status.status {
            TicketState::Waiting => {
                tokio::time::sleep(Duration::from_millis(150 + (i % 7) as u64 * 20)).await
            }
            TicketState::SoldOut => return Ending::SoldOut,
            TicketState::TokenIssued => {
                // The order goes through the other replica.
                let token = status.entry_token.expect("a token");
                let other = &apps[(turn + 1) % apps.len()];
                let response = client
                    .post(format!("{other}{}", paths::orders("main")))
                    .header("X-Entry-Token", &token)
                    .header("Idempotency-Key", format!("order-{i}"))
                    .json(&json!({"sku": "sneaker-42", "quantity": 1}))
                    .send()
                    .await
                    .expect("order answered");
                let code = response.status();
                let body: serde_json::Value = response.json().await.unwrap_or_default();
                if code == StatusCode::CREATED {
                    return Ending::Bought(body["orderId"].as_str().unwrap_or_default().into());
                }
                assert_eq!(body["error"], "sold_out", "order {code}: {body}");
                let after = poll(&client, base, &ticket_id).await.expect("poll");
                return Ending::Refused(after.status);
            }
            other => panic!("shopper {i}: unexpected state {other:?}"),
        }
    }
}

async fn five_hundred_shoppers_race_for_one_hundred_units(backend: Backend) {
    let args = ["--admission-rate", "2000"];
    // Two replicas share one Redis or one Redis Cluster.
    let (redis, cluster, apps) = match backend {
        Backend::Memory => (
            None,
            None,
            vec![TestApp::spawn(Backend::Memory, &args).await],
        ),
        Backend::Redis => {
            let redis = RedisServer::start();
            let a = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
            let b = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
            (Some(redis), None, vec![a, b])
        }
        Backend::RedisCluster => {
            let cluster = tokio::task::spawn_blocking(RedisCluster::start)
                .await
                .expect("the cluster starts");
            let a = TestApp::spawn_on_cluster(&cluster, &args).await;
            let b = TestApp::spawn_on_cluster(&cluster, &args).await;
            (None, Some(cluster), vec![a, b])
        }
    };
    let admin = &apps[0];
    admin
        .patch_room("main", json!({"paused": true, "stock": UNITS}))
        .await;
    let mut tickets = Vec::new();
    for i in 0..SHOPPERS {
        let (_, ticket) = apps[i % apps.len()]
            .join("main", Some(&format!("shopper-{i}")))
            .await;
        assert_eq!(ticket.status, TicketState::Waiting);
        tickets.push(ticket.ticket_id);
    }
    let bases: Arc<Vec<String>> = Arc::new(apps.iter().map(|app| app.url("")).collect());
    let started = Instant::now();
    admin.patch_room("main", json!({"paused": false})).await;
    let shoppers = tickets
        .into_iter()
        .enumerate()
        .map(|(i, id)| tokio::spawn(shop(bases.clone(), i, id)));
    let endings: Vec<Ending> = futures_util::future::join_all(shoppers)
        .await
        .into_iter()
        .map(|ending| ending.expect("shopper task"))
        .collect();
    let took = started.elapsed();
    let orders: Vec<&String> = endings
        .iter()
        .filter_map(|e| match e {
            Ending::Bought(order) => Some(order),
            _ => None,
        })
        .collect();
    let sold_out = endings
        .iter()
        .filter(|e| matches!(e, Ending::SoldOut))
        .count();
    let refused: Vec<&TicketState> = endings
        .iter()
        .filter_map(|e| match e {
            Ending::Refused(state) => Some(state),
            _ => None,
        })
        .collect();
    println!(
        "{SHOPPERS} shoppers, {UNITS} units, {} replica(s): {} bought, {sold_out} SOLD_OUT, {} refused at checkout, in {took:.1?}",
        apps.len(),
        orders.len(),
        refused.len()
    );
    assert_eq!(orders.len() as u64, UNITS, "{endings:?}");
    let distinct: HashSet<&String> = orders.iter().copied().collect();
    assert_eq!(distinct.len(), orders.len(), "an order id answered twice");
    assert_eq!(orders.len() + sold_out + refused.len(), SHOPPERS);
    assert!(
        refused
            .iter()
            .all(|s| matches!(s, TicketState::TokenIssued | TicketState::Expired)),
        "{refused:?}"
    );
    let settings = admin.patch_room("main", json!({})).await;
    assert_eq!(settings["sold"], UNITS, "{settings}");
    assert_eq!(settings["stock"], 0, "{settings}");
    assert_eq!(settings["soldOut"], true, "{settings}");
    for app in &apps {
        let (_, info) = app.get_json(&paths::room("main")).await;
        assert_eq!(info["state"], "SOLD_OUT", "{info}");
    }
    drop(apps);
    drop((redis, cluster));
}
