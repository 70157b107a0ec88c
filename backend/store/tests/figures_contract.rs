//! The figures role, the same on every store: each replica's record is kept for its TTL and read
//! back by every share, a read-only share writes no record, and the sale's totals (joined,
//! admitted, left, expired, peak line, longest wait at the front, sold-out time) are the room's.

mod support;
use support::{room_id, JoinLine};

use vestibule_store::ids::random_id;
use vestibule_store::{now_ms, FigureShare, RoomId, SalePatch, SettingsPatch, Store, StoreError};

const ROOM: &str = "main";

fn share<'a>(replica: &'a str, record: Option<&'a str>, now_ms: u64) -> FigureShare<'a> {
    FigureShare {
        replica,
        record,
        expired: 0,
        now_ms,
        ttl_ms: 3_000,
    }
}

#[tokio::test]
async fn every_live_record_is_read_back_and_a_stale_one_is_not() {
    for (store, _redis, _dir) in support::stores(&[ROOM], &support::defaults()).await {
        let kind = store.kind();
        let now = now_ms();
        let room = room_id(ROOM);
        store
            .share_figures(room, &share("b", Some("rb"), now))
            .await
            .unwrap();
        let read = store
            .share_figures(room, &share("a", Some("ra"), now + 1_000))
            .await
            .unwrap();
        assert_eq!(read.records, ["ra", "rb"], "{kind}: both, by replica");
        // A replica's next record replaces its last.
        let read = store
            .share_figures(room, &share("b", Some("rb2"), now + 2_000))
            .await
            .unwrap();
        assert_eq!(read.records, ["ra", "rb2"], "{kind}");
        // Past "a"'s TTL (written at +1 s, kept 3 s) only "b" is live; a read writes nothing.
        let read = store
            .share_figures(room, &share("c", None, now + 4_500))
            .await
            .unwrap();
        assert_eq!(read.records, ["rb2"], "{kind}: a stale record is dropped");
        let gone = store
            .share_figures(RoomId::new(ROOM, 9), &share("a", Some("x"), now))
            .await;
        assert!(
            matches!(gone, Err(StoreError::RoomGone(_))),
            "{kind}: another generation: {gone:?}"
        );
    }
}

#[tokio::test]
async fn the_totals_are_the_sales() {
    for (store, _redis, _dir) in support::stores(&[ROOM], &support::defaults()).await {
        let kind = store.kind();
        let room = room_id(ROOM);
        let joined_at = now_ms();
        for n in 0..4 {
            let id = random_id();
            store
                .join_line(room, Some(&format!("k{n}")), &id)
                .await
                .unwrap();
        }
        let first = store
            .share_figures(room, &share("a", Some("r"), now_ms()))
            .await
            .unwrap();
        assert_eq!(first.totals.peak_waiting, 4, "{kind}");
        assert_eq!(first.totals.sold_out_at_ms, None, "{kind}");
        assert_eq!(support::admit(&*store, ROOM, 1).await, 1, "{kind}");
        // The leader adds what its ticks saw expire; the front (the second to join) has waited ~7 s.
        let later = joined_at + 7_000;
        let leader = FigureShare {
            expired: 2,
            ..share("a", Some("r"), later)
        };
        store.share_figures(room, &leader).await.unwrap();
        let totals = store
            .share_figures(
                room,
                &FigureShare {
                    expired: 3,
                    ..leader
                },
            )
            .await
            .unwrap()
            .totals;
        assert_eq!(
            (totals.joined, totals.admitted, totals.expired),
            (4, 1, 5),
            "{kind}"
        );
        assert_eq!(totals.peak_waiting, 4, "{kind}: the peak stays");
        assert!(
            (6..=8).contains(&totals.longest_wait_secs),
            "{kind}: longest wait {}",
            totals.longest_wait_secs
        );
        sold_out(&*store).await;
        let at = later + 1_000;
        let totals = store
            .share_figures(room, &share("b", None, at))
            .await
            .unwrap()
            .totals;
        assert_eq!(totals.sold_out_at_ms, Some(at), "{kind}");
        let again = store
            .share_figures(room, &share("b", None, at + 5))
            .await
            .unwrap();
        assert_eq!(again.totals.sold_out_at_ms, Some(at), "{kind}: marked once");
    }
}

async fn sold_out(store: &dyn Store) {
    let patch = SettingsPatch {
        sale: SalePatch {
            sold_out: Some(true),
            ..SalePatch::default()
        },
        ..SettingsPatch::default()
    };
    support::change(store, ROOM, &patch, None).await.unwrap();
}
