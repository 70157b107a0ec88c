//! One leader tick: `admit.lua`.

use super::doc;
use super::keys::RoomKeys;
use super::reply::{as_array, as_string, as_u64};
use super::RedisStore;
use crate::{AdmitOutcome, AdmitRequest, RoomId, StoreError};

impl RedisStore {
    pub(super) async fn admit_in_redis(
        &self,
        room: RoomId<'_>,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.admit.call(&keys);
        call.arg("generation", room.generation)
            .arg("holder", request.holder)
            .arg("fence", request.epoch)
            .arg("now_ms", request.now_ms)
            .arg("ttl_ms", request.token_ttl_ms)
            .arg("keep_ms", request.keep_ms)
            .arg("cap", request.max_active_users.map_or(-1, |cap| cap as i64))
            .arg("prefix", keys.prefix())
            .arg("lease_ms", request.lease_ms)
            .arg("abandon_ms", request.abandon_after_ms)
            .arg("hold_ms", request.hold_place_ms)
            .arg("bank_max", request.instant_bank_max)
            .arg(
                "pace_text",
                request.pace.map(|pace| pace.encode()).unwrap_or_default(),
            );
        for token in request.tokens {
            call.item(&[token]);
        }
        let reply = self.link.run(&call).await?;
        let Some(status) = reply.first() else {
            return Err(StoreError::Corrupt("admit reply is empty".into()));
        };
        if as_string(status)? == "fenced" {
            return Ok(AdmitOutcome {
                fenced: true,
                ..AdmitOutcome::default()
            });
        }
        let [_, admitted, expired, waiting, active, skipped, popped, filing, fields] =
            reply.as_slice()
        else {
            return Err(StoreError::Corrupt("admit reply needs 9 fields".into()));
        };
        let settings = doc::decode_live(room.slug, &as_array(fields.clone())?)?;
        self.note_lottery(room, settings.settings.queueing_method.is_random());
        // A switch to random whose filing is not done (its replica died, or a skipped ticket
        // came back unfiled): the leader files the waiting tickets now; this tick admitted nobody.
        if as_u64(filing)? == 1 {
            self.file_lottery(room).await?;
        }
        Ok(AdmitOutcome {
            fenced: false,
            admitted: as_u64(admitted)?,
            expired: as_u64(expired)?,
            waiting: as_u64(waiting)?,
            active: as_u64(active)?,
            skipped: as_u64(skipped)?,
            settings: Some(settings),
            popped: as_u64(popped)?,
        })
    }
}
