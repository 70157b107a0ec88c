//! Entry tokens: `token.lua`, for a check and for an order's consume (confirmed on the
//! replicas: `confirm.rs`).

use super::keys::RoomKeys;
use super::reply::{as_string, two_strings};
use super::RedisStore;
use crate::{OrderClaim, RoomId, StoreError, TokenCheck, TokenUse};

impl RedisStore {
    /// `token.lua`: a check (`order` = `None`) or an order's consume.
    pub(super) async fn run_token_script(
        &self,
        room: RoomId<'_>,
        token: &str,
        now_ms: u64,
        order: Option<&OrderClaim<'_>>,
    ) -> Result<TokenUse, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.token.call(&keys);
        call.arg("generation", room.generation)
            .arg("token", token)
            .arg("now_ms", now_ms)
            .arg("consume", if order.is_some() { "1" } else { "0" })
            .arg("keep_ms", self.options.keep_ms)
            .arg("prefix", keys.prefix())
            .arg(
                "order_key",
                order.and_then(|o| o.idempotency_key).unwrap_or_default(),
            )
            .arg("receipt", order.map(|o| o.receipt).unwrap_or_default());
        // A use runs on its own connection, where its `WAIT` holds up no poll, and is answered
        // only once it (or the use it replays) will survive a failover (`confirm.rs`).
        let reply = match order {
            Some(_) => self.confirmed_use(&call, &keys).await?,
            None => self.link.run(&call).await?,
        };
        let (verdict, ticket_id) = two_strings(&reply)?;
        Ok(match verdict.as_str() {
            "VALID" => TokenUse::Consumed { ticket_id },
            "REPLAY" => TokenUse::Replayed {
                ticket_id,
                receipt: reply.get(2).map(as_string).transpose()?.unwrap_or_default(),
            },
            "EXPIRED" => TokenUse::Refused(TokenCheck::Expired),
            "USED" => TokenUse::Refused(TokenCheck::Used),
            "SOLD_OUT" => TokenUse::SoldOut { ticket_id },
            _ => TokenUse::Refused(TokenCheck::Unknown),
        })
    }

    /// The entry-token signing key shared by every replica on this Redis (PEM at `key`): writes
    /// `candidate` with `SET NX` and a transaction reads back whichever copy is in force, so all
    /// replicas that start together adopt the first writer's key.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot be reached or answers something else than a string.
    pub async fn shared_signing_key(
        &self,
        key: &str,
        candidate: &str,
    ) -> Result<String, StoreError> {
        let mut connection = self.connection();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(key)
            .arg(candidate)
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(key);
        let (value,): (Option<String>,) =
            self.link.bounded(pipe.query_async(&mut connection)).await?;
        value.ok_or_else(|| StoreError::Corrupt(format!("{key} vanished right after SET NX")))
    }
}
