//! The queue: `join.lua` (with the join limit), a ticket's read, `sse_refresh.lua`, `leave.lua`
//! and the counts.

use async_trait::async_trait;

use super::group_commit::{Join, ParkPlan};
use super::keys::{slug_prefix, Key, RoomKeys};
use super::reply::{parse_state, settled_record, two_strings};
use super::RedisStore;
use crate::draw::draw_key;
use crate::ids::derived_id;
use crate::{
    InstantAdmission, JoinKind, JoinLimit, JoinOutcome, JoinRefusal, JoinReply, JoinRequest,
    LeaveOutcome, Queue, RoomCounts, RoomId, StoreError, TicketRecord, Unconfirmed,
};

/// How long a used challenge's marker outlives the challenge, ms (clock skew between replicas).
const MARK_SLACK_MS: u64 = 5_000;

/// How `join.lua` is asked to join.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct JoinMode<'a> {
    /// The room's draw seed for a join in the pre-queue window (`A[13]`, and the ticket's
    /// place in the drawn order, `A[15..16]`); `None` for an ordinary join.
    pub prequeue_seed: Option<&'a [u8]>,
    /// The settings version the join was decided on (`A[14]`; `None` checks nothing).
    pub settings_version: Option<u64>,
    /// How its ticket is parked should its shopper be told 504 (not for a pre-queue join).
    pub unconfirmed: Unconfirmed,
}

impl RedisStore {
    pub(super) async fn join_line(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        instant: Option<&InstantAdmission>,
        mode: JoinMode<'_>,
    ) -> Result<JoinReply, StoreError> {
        // A key's first ticket takes an id derived from the key, so that a retry finds it without
        // a dedup entry (join.lua); `new_id` serves joins without a key and re-joins after LEFT
        // or EXPIRED.
        let derived = match dedup_key {
            Some(key) => derived_id(&self.room_secret(room).await?, key),
            None => String::new(),
        };
        let now_ms = crate::now_ms();
        // A random room's join carries the ticket's lottery key (join.lua asks for it when this
        // process did not know the room is random yet).
        let lottery_seed = if mode.prequeue_seed.is_none() && self.is_lottery_room(room) {
            Some(self.seed_for_joins(room).await?)
        } else {
            None
        };
        // A pre-queue join carries its place in the drawn order (join.lua, draw.lua): one for the
        // fresh id and one for the key's derived id, whichever the script gives the ticket.
        let (order_new, order_derived) = match mode.prequeue_seed.or(lottery_seed.as_deref()) {
            Some(seed) => (
                draw_key(seed, new_id),
                if derived.is_empty() {
                    String::new()
                } else {
                    draw_key(seed, &derived)
                },
            ),
            None => (String::new(), String::new()),
        };
        let (client, period, burst) = match limit {
            Some(limit) => (
                limit.client.clone(),
                limit.period_ms().to_string(),
                limit.per_minute.to_string(),
            ),
            None => (String::new(), "0".into(), "0".into()),
        };
        let (token, token_ttl, keep) = match instant {
            Some(instant) => (
                instant.token.clone(),
                instant.token_ttl_ms.to_string(),
                self.options.keep_ms.to_string(),
            ),
            None => (String::new(), "0".into(), "0".into()),
        };
        // A join told 504 may have made its fresh id or, with a key, the key's derived id
        // (join.lua); a pre-queue join is left to the draw.
        let park = mode.prequeue_seed.is_none().then(|| ParkPlan {
            ids: [new_id, derived.as_str()]
                .into_iter()
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
                .collect(),
            hold_ms: mode.unconfirmed.hold_place_ms,
            keep_ms: self.options.keep_ms,
            retry_for: std::time::Duration::from_millis(mode.unconfirmed.retry_for_ms),
        });
        // An item of join.lua's spec, in its order (the shared arguments go once per call).
        let join = Join {
            args: [
                new_id.to_owned(),
                dedup_key.unwrap_or("").to_owned(),
                derived,
                client,
                period,
                burst,
                token,
                token_ttl,
                keep,
                if mode.prequeue_seed.is_some() {
                    "1"
                } else {
                    "0"
                }
                .to_owned(),
                mode.settings_version
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                order_new,
                order_derived,
            ],
            // With a key, a join run twice finds the ticket the first made: it may go again
            // when the connection drops. Without one it would make a second.
            keyed: dedup_key.is_some(),
            park,
        };
        let line = self.joins.join(room, join).await?;
        let mut words = line.split(' ');
        let outcome = words.next().unwrap_or_default();
        let mut next = || words.next().unwrap_or_default();
        let number = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| StoreError::Corrupt(format!("join.lua answered {line:?}")))
        };
        let (id, created, ticket) = match outcome {
            "waiting" => {
                let id = next().to_owned();
                let created = next() == "1";
                let position = number(next())?;
                let ticket = TicketRecord::waiting(&id, position);
                (id, created, Some(ticket))
            }
            "prequeue" => {
                let id = next().to_owned();
                let created = next() == "1";
                let ticket = TicketRecord {
                    state: vestibule_shared::TicketState::PreQueue,
                    position: None,
                    ..TicketRecord::waiting(&id, 0)
                };
                (id, created, Some(ticket))
            }
            "admitted" => {
                let id = next().to_owned();
                let expires_at_ms = number(next())?;
                let Some(instant) = instant else {
                    return Err(StoreError::Corrupt(
                        "join.lua admitted a join that carried no token".into(),
                    ));
                };
                return Ok(JoinReply::Joined(JoinOutcome {
                    ticket: TicketRecord {
                        id,
                        state: vestibule_shared::TicketState::TokenIssued,
                        position: None,
                        entry_token: Some(instant.token.clone()),
                        token_expires_at_ms: Some(expires_at_ms),
                        place_kept: false,
                    },
                    created: true,
                }));
            }
            "ended" => (next().to_owned(), false, None),
            "limited" => {
                return Ok(JoinReply::RateLimited {
                    retry_after_ms: number(next())?,
                })
            }
            "sold_out" => return Ok(JoinReply::Refused(JoinRefusal::SoldOut)),
            "closed" => return Ok(JoinReply::Refused(JoinRefusal::Closed)),
            "stale" => return Ok(JoinReply::SettingsChanged),
            "needs_lottery" => {
                // A random room: join again with the ticket's lottery key (the store remembers
                // the room is random from now on).
                if lottery_seed.is_some() {
                    return Err(StoreError::Corrupt(
                        "join.lua asked again for lottery keys it was given".into(),
                    ));
                }
                self.note_lottery(room, true);
                return Box::pin(self.join_line(room, dedup_key, new_id, limit, instant, mode))
                    .await;
            }
            _ => return Err(StoreError::Corrupt(format!("join.lua answered {line:?}"))),
        };
        let ticket = match ticket {
            Some(ticket) => ticket,
            // The deduplicated ticket has been admitted since: read it whole.
            None => self
                .ticket(room, &id, now_ms)
                .await?
                .ok_or_else(|| StoreError::Corrupt("deduplicated ticket vanished".into()))?,
        };
        Ok(JoinReply::Joined(JoinOutcome { ticket, created }))
    }
}

#[async_trait]
impl Queue for RedisStore {
    async fn join(
        &self,
        room: RoomId<'_>,
        request: &JoinRequest<'_>,
    ) -> Result<JoinReply, StoreError> {
        let JoinRequest {
            dedup_key,
            new_id,
            limit,
            kind,
            unconfirmed,
        } = *request;
        match kind {
            JoinKind::Line => {
                let mode = JoinMode {
                    unconfirmed,
                    ..JoinMode::default()
                };
                self.join_line(room, dedup_key, new_id, limit, None, mode)
                    .await
            }
            JoinKind::Admitting(instant) => {
                let mode = JoinMode {
                    prequeue_seed: None,
                    settings_version: instant.settings_version,
                    unconfirmed,
                };
                self.join_line(room, dedup_key, new_id, limit, Some(instant), mode)
                    .await
            }
            JoinKind::PreQueue { settings_version } => {
                self.join_prequeue(room, dedup_key, new_id, limit, settings_version)
                    .await
            }
        }
    }

    async fn ticket(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        let keys = RoomKeys::new(room);
        // ZRANK first: if it finds the ticket it is waiting, whatever happens after.
        let mut pipe = redis::pipe();
        pipe.zrank(keys.of(Key::Queue), id)
            .sismember(keys.of(Key::Prequeue), id)
            .cmd("HMGET")
            .arg(format!("{}ticket:{id}", keys.prefix()))
            .arg(&["state", "tok", "exp"])
            .hget(keys.of(Key::Doc), "qmethod")
            .exists(keys.of(Key::LotteryFiling))
            .hget(keys.of(Key::LotteryMac), id);
        type Read = (
            Option<u64>,
            bool,
            Vec<Option<String>>,
            Option<String>,
            bool,
            Option<String>,
        );
        let (rank, prequeue, fields, method, filing, member): Read = self
            .link
            .query_repeatable(&pipe)
            .await
            .map_err(StoreError::for_read)?;
        let mut connection = self.link.connection.clone();
        if let Some(mut rank) = rank {
            // A random room's position is the rank in its lottery (docs/DESIGN.md "Random
            // queueing"), once every waiting ticket is filed.
            if let (Some("random"), false, Some(member)) = (method.as_deref(), filing, member) {
                let in_lottery: Option<u64> = self
                    .link
                    .bounded(
                        redis::cmd("ZRANK")
                            .arg(keys.of(Key::Lottery))
                            .arg(member)
                            .query_async(&mut connection),
                    )
                    .await
                    .map_err(StoreError::for_read)?;
                rank = in_lottery.unwrap_or(rank);
            }
            if prequeue {
                return Ok(Some(TicketRecord {
                    state: vestibule_shared::TicketState::PreQueue,
                    position: None,
                    ..TicketRecord::waiting(id, 0)
                }));
            }
            return Ok(Some(TicketRecord::waiting(id, rank + 1)));
        }
        let mut fields = fields.into_iter().map(Option::unwrap_or_default);
        let state = fields.next().unwrap_or_default();
        let token = fields.next().unwrap_or_default();
        let expires = fields.next().unwrap_or_default();
        settled_record(id, &state, token, &expires, now_ms)
    }

    /// `join.lua`'s look-up of a key's ticket, without joining: the dedup entry, else the key's
    /// derived id; only a live ticket counts (see `Store::keyed_ticket`).
    async fn keyed_ticket(
        &self,
        room: RoomId<'_>,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        let mut connection = self.link.connection.clone();
        let mapped: Option<String> = self
            .link
            .bounded(
                redis::cmd("HGET")
                    .arg(RoomKeys::new(room).of(Key::Dedup))
                    .arg(key)
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        let id = match mapped {
            Some(id) => id,
            None => derived_id(&self.room_secret(room).await?, key),
        };
        let record = self.ticket(room, &id, now_ms).await?;
        Ok(record.filter(|ticket| {
            use vestibule_shared::TicketState::{
                Completed, PreQueue, SoldOut, TokenIssued, Waiting,
            };
            matches!(
                ticket.state,
                PreQueue | Waiting | TokenIssued | Completed | SoldOut
            )
        }))
    }

    async fn leave(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.leave.call(&keys);
        call.arg("generation", room.generation)
            .arg("id", id)
            .arg("now_ms", now_ms)
            .arg("keep_ms", self.options.keep_ms)
            .arg("prefix", keys.prefix());
        let reply = self.link.run(&call).await?;
        let (outcome, state) = two_strings(&reply)?;
        Ok(match outcome.as_str() {
            "LEFT" => LeaveOutcome::Left,
            "NOT_FOUND" => LeaveOutcome::NotFound,
            _ => LeaveOutcome::AlreadyEnded(parse_state(&state)?),
        })
    }

    async fn counts(&self, room: RoomId<'_>, now_ms: u64) -> Result<RoomCounts, StoreError> {
        let keys = RoomKeys::new(room);
        let mut pipe = redis::pipe();
        pipe.zcard(keys.of(Key::Queue))
            .zcount(keys.of(Key::Active), format!("({now_ms}"), "+inf");
        let mut connection = self.link.connection.clone();
        let (waiting, active): (u64, u64) = self
            .link
            .bounded(pipe.query_async(&mut connection))
            .await
            .map_err(StoreError::for_read)?;
        Ok(RoomCounts { waiting, active })
    }

    /// `SET vestibule:{room}:pow:<id> 1 NX PX (expiry − now + slack)`: true when this call set it.
    async fn use_challenge(
        &self,
        room: RoomId<'_>,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let ttl_ms = expires_at_ms.saturating_sub(now_ms) + MARK_SLACK_MS;
        let mut connection = self.connection();
        let set: Option<String> = self
            .link
            .bounded(
                redis::cmd("SET")
                    .arg(format!("{}pow:{id}", slug_prefix(room.slug)))
                    .arg(1)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut connection),
            )
            .await?;
        Ok(set.is_some())
    }
}
