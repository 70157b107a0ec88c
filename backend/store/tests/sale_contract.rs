//! The store contract of a room's sale (docs/DESIGN.md "Stock and sold out"), against
//! `MemoryStore`, `DurableStore` (a temp data dir) and `RedisStore` (a private `redis-server`):
//! an order takes one unit with its token in one step, the last unit sells the room out, a live
//! token with no unit left is refused without being used up, a sold-out or closed room makes no
//! new tickets, a sold-out room admits nobody, and the sold-out mark is never cleared.

use vestibule_store::durable::{DurableOptions, DurableStore};
use vestibule_store::ids::random_id;
use vestibule_store::{
    now_ms, Catalog, JoinRefusal, JoinReply, JoinRequest, OrderClaim, SalePatch, SaleSettings,
    Settings, SettingsPatch, SettingsUpdate, Store, TokenCheck, TokenUse,
};

mod support;

use support::defaults;
use support::room_id;

const ROOM: &str = "main";

/// Each store with its rooms initialised to [`defaults`].
async fn stores() -> Vec<support::UnderTest> {
    support::stores(&[ROOM], &defaults()).await
}

async fn patch_sale(store: &dyn Store, sale: SalePatch) -> Settings {
    let patch = SettingsPatch {
        sale,
        ..SettingsPatch::default()
    };
    match support::change(store, ROOM, &patch, None).await.unwrap() {
        SettingsUpdate::Applied(versioned) => versioned.settings,
        other => panic!("{}: not applied: {other:?}", store.kind()),
    }
}

async fn sale(store: &dyn Store) -> SaleSettings {
    store.room_settings(ROOM).await.unwrap().settings.sale
}

/// Takes the lease and admits up to `count`; returns how many were admitted.
async fn admit(store: &dyn Store, count: usize) -> u64 {
    support::admit(store, ROOM, count).await
}

async fn join(store: &dyn Store, key: &str) -> JoinReply {
    let id = random_id();
    let request = JoinRequest::new(&id).keyed(Some(key));
    store.join(room_id(ROOM), &request).await.unwrap()
}

async fn token_of(store: &dyn Store, id: &str) -> String {
    let record = store
        .ticket(room_id(ROOM), id, now_ms())
        .await
        .unwrap()
        .unwrap();
    record.entry_token.expect("admitted")
}

async fn order(store: &dyn Store, token: &str) -> TokenUse {
    let claim = OrderClaim {
        idempotency_key: None,
        receipt: "{}",
    };
    store
        .consume_token(room_id(ROOM), token, &claim, now_ms())
        .await
        .unwrap()
}

fn joined_id(reply: JoinReply) -> String {
    match reply {
        JoinReply::Joined(outcome) => outcome.ticket.id,
        other => panic!("not joined: {other:?}"),
    }
}

#[tokio::test]
async fn orders_take_units_with_their_tokens_and_the_last_unit_sells_the_room_out() {
    for (store, _redis, _dir) in stores().await {
        let store = store.as_ref();
        let kind = store.kind();
        let applied = patch_sale(
            store,
            SalePatch {
                stock: Some(Some(2)),
                ..SalePatch::default()
            },
        )
        .await;
        assert_eq!(applied.sale.stock, Some(2), "{kind}");
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(joined_id(join(store, &format!("k{i}")).await));
        }
        // Never more tokens out than units left: two of three are admitted.
        assert_eq!(admit(store, 10).await, 2, "{kind}");
        for id in &ids[..2] {
            let token = token_of(store, id).await;
            assert!(
                matches!(order(store, &token).await, TokenUse::Consumed { .. }),
                "{kind}"
            );
        }
        let after = sale(store).await;
        assert_eq!(
            (after.stock, after.sold, after.sold_out),
            (Some(0), 2, true),
            "{kind}"
        );
        // Sold out: no new ticket, the waiting one keeps its record (it reads SOLD_OUT through the
        // room's mark), and nobody is admitted any more.
        assert_eq!(
            join(store, "late").await,
            JoinReply::Refused(JoinRefusal::SoldOut),
            "{kind}"
        );
        match join(store, "k2").await {
            JoinReply::Joined(outcome) => {
                assert!(!outcome.created && outcome.ticket.id == ids[2], "{kind}")
            }
            other => panic!("{kind}: a keyed re-join lost its ticket: {other:?}"),
        }
        assert_eq!(admit(store, 10).await, 0, "{kind}");
        assert_eq!(
            store.counts(room_id(ROOM), now_ms()).await.unwrap().active,
            0,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn a_live_token_with_no_unit_left_is_refused_and_stays_live() {
    for (store, _redis, _dir) in stores().await {
        let store = store.as_ref();
        let kind = store.kind();
        let id = joined_id(join(store, "k").await);
        assert_eq!(admit(store, 1).await, 1, "{kind}");
        let token = token_of(store, &id).await;
        let sold_out = patch_sale(
            store,
            SalePatch {
                stock: Some(Some(0)),
                ..SalePatch::default()
            },
        )
        .await;
        assert!(sold_out.sale.sold_out, "{kind}: a stock of 0 sells out");
        assert!(
            matches!(order(store, &token).await, TokenUse::SoldOut { ref ticket_id } if *ticket_id == id),
            "{kind}"
        );
        assert!(
            matches!(
                store
                    .check_token(room_id(ROOM), &token, now_ms())
                    .await
                    .unwrap(),
                TokenCheck::Valid { .. }
            ),
            "{kind}: the refusal used the token up"
        );
        assert_eq!(sale(store).await.sold, 0, "{kind}");
    }
}

#[tokio::test]
async fn an_operators_sold_out_honours_tokens_out_and_is_never_cleared() {
    for (store, _redis, _dir) in stores().await {
        let store = store.as_ref();
        let kind = store.kind();
        patch_sale(
            store,
            SalePatch {
                stock: Some(Some(5)),
                ..SalePatch::default()
            },
        )
        .await;
        let id = joined_id(join(store, "k").await);
        joined_id(join(store, "k2").await);
        assert_eq!(admit(store, 1).await, 1, "{kind}");
        let token = token_of(store, &id).await;
        patch_sale(
            store,
            SalePatch {
                sold_out: Some(true),
                message_en: Some(Some("All gone".into())),
                message_ko: Some(Some("모두 팔렸습니다".into())),
                ..SalePatch::default()
            },
        )
        .await;
        assert_eq!(
            admit(store, 5).await,
            0,
            "{kind}: a sold-out room admits nobody"
        );
        assert!(
            matches!(order(store, &token).await, TokenUse::Consumed { .. }),
            "{kind}: a token out is honoured"
        );
        let after = sale(store).await;
        assert_eq!((after.stock, after.sold), (Some(4), 1), "{kind}");
        assert_eq!(
            after.message_ko.as_deref(),
            Some("모두 팔렸습니다"),
            "{kind}"
        );
        // The mark stays: SOLD_OUT tickets are final.
        let reopened = patch_sale(
            store,
            SalePatch {
                sold_out: Some(false),
                ..SalePatch::default()
            },
        )
        .await;
        assert!(reopened.sale.sold_out, "{kind}");
        assert_eq!(
            join(store, "new").await,
            JoinReply::Refused(JoinRefusal::SoldOut),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn a_closed_room_takes_no_new_shoppers_but_admits_those_in_line() {
    for (store, _redis, _dir) in stores().await {
        let store = store.as_ref();
        let kind = store.kind();
        let id = joined_id(join(store, "k").await);
        patch_sale(
            store,
            SalePatch {
                closed: Some(true),
                ..SalePatch::default()
            },
        )
        .await;
        assert_eq!(
            join(store, "new").await,
            JoinReply::Refused(JoinRefusal::Closed),
            "{kind}"
        );
        assert_eq!(joined_id(join(store, "k").await), id, "{kind}");
        assert_eq!(admit(store, 5).await, 1, "{kind}");
        patch_sale(
            store,
            SalePatch {
                closed: Some(false),
                ..SalePatch::default()
            },
        )
        .await;
        assert!(
            matches!(join(store, "new").await, JoinReply::Joined(_)),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn racing_orders_sell_each_unit_exactly_once() {
    for (store, _redis, _dir) in stores().await {
        let kind = store.kind();
        let mut ids = Vec::new();
        for i in 0..30 {
            ids.push(joined_id(join(store.as_ref(), &format!("k{i}")).await));
        }
        assert_eq!(admit(store.as_ref(), 30).await, 30, "{kind}");
        let mut tokens = Vec::new();
        for id in &ids {
            tokens.push(token_of(store.as_ref(), id).await);
        }
        patch_sale(
            store.as_ref(),
            SalePatch {
                stock: Some(Some(10)),
                ..SalePatch::default()
            },
        )
        .await;
        let orders = tokens.into_iter().map(|token| {
            let store = store.clone();
            tokio::spawn(async move { order(store.as_ref(), &token).await })
        });
        let verdicts: Vec<TokenUse> = futures_util::future::join_all(orders)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let sold = verdicts
            .iter()
            .filter(|v| matches!(v, TokenUse::Consumed { .. }))
            .count();
        let refused = verdicts
            .iter()
            .filter(|v| matches!(v, TokenUse::SoldOut { .. }))
            .count();
        assert_eq!((sold, refused), (10, 20), "{kind}: {verdicts:?}");
        let after = sale(store.as_ref()).await;
        assert_eq!(
            (after.stock, after.sold, after.sold_out),
            (Some(0), 10, true),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn the_durable_store_keeps_stock_sold_and_the_mark_across_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let store = DurableStore::open(dir.path(), DurableOptions::default()).unwrap();
        store.seed_room(ROOM, &defaults()).await.unwrap();
        patch_sale(
            &store,
            SalePatch {
                stock: Some(Some(1)),
                ..SalePatch::default()
            },
        )
        .await;
        let id = joined_id(join(&store, "k").await);
        assert_eq!(admit(&store, 1).await, 1);
        let token = token_of(&store, &id).await;
        assert!(matches!(
            order(&store, &token).await,
            TokenUse::Consumed { .. }
        ));
    }
    let store = DurableStore::open(dir.path(), DurableOptions::default()).unwrap();
    let after = sale(&store).await;
    assert_eq!(
        (after.stock, after.sold, after.sold_out),
        (Some(0), 1, true)
    );
    assert_eq!(
        join(&store, "new").await,
        JoinReply::Refused(JoinRefusal::SoldOut)
    );
}
