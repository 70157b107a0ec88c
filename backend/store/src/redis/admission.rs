//! One leader tick: `admit.lua`.

use super::doc;
use super::keys::RoomKeys;
use super::reply::{as_array, as_string, as_u64};
use super::RedisStore;
use async_trait::async_trait;

use crate::{
    Admission, AdmitOutcome, AdmitRequest, LeaseOutcome, OrderClaim, Pace, RoomId, StoreError,
    TokenCheck, TokenUse, VersionedSettings,
};

impl RedisStore {}

#[async_trait]
impl Admission for RedisStore {
    async fn lease(&self, room: RoomId<'_>, holder: &str) -> Result<LeaseOutcome, StoreError> {
        let keys = RoomKeys::new(room);
        // This process's copy of the room secret goes along, so that a Redis restarted without
        // persistence gets the same secret back and retried joins keep finding their tickets.
        let secret = self.cached_secret(room);
        let mut call = self.scripts.lease.call(&keys);
        call.arg("generation", room.generation)
            .arg("holder", holder)
            .arg("lease_ms", self.options.lease_ms)
            .arg("secret_offer", secret.as_deref().unwrap_or_default());
        let reply = self.link.run(&call).await?;
        let [epoch, secret, active, pace, fields] = reply.as_slice() else {
            return Err(StoreError::Corrupt("lease reply needs 5 fields".into()));
        };
        self.remember_secret(room, secret, false)?;
        let settings: VersionedSettings = doc::decode_live(room.slug, &as_array(fields.clone())?)?;
        let epoch = as_u64(epoch)?;
        Ok(LeaseOutcome {
            epoch: (epoch > 0).then_some(epoch),
            settings,
            active: as_u64(active)?,
            pace: Pace::decode(&as_string(pace)?),
        })
    }

    async fn release_lease(&self, room: RoomId<'_>, holder: &str) -> Result<(), StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.release_lease.call(&keys);
        call.arg("holder", holder);
        self.link.run_value(&call).await.map(drop)
    }

    async fn admit(
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
            .arg("keep_ms", self.options.keep_ms)
            .arg("cap", request.max_active_users.map_or(-1, |cap| cap as i64))
            .arg("prefix", keys.prefix())
            .arg("lease_ms", self.options.lease_ms)
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

    async fn check_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        let reply = self
            .run_token_script(room, token, now_ms, None)
            .await
            .map_err(StoreError::for_read)?;
        Ok(match reply {
            TokenUse::Consumed { ticket_id }
            | TokenUse::Replayed { ticket_id, .. }
            | TokenUse::SoldOut { ticket_id } => TokenCheck::Valid { ticket_id },
            TokenUse::Refused(check) => check,
        })
    }

    async fn consume_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        self.run_token_script(room, token, now_ms, Some(order))
            .await
    }
}
