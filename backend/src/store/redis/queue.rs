//! The queue: `join.lua` (with the join limit), a ticket's read, `sse_refresh.lua`, `leave.lua`
//! and the counts.

use redis::Value;

use super::group_commit::Join;
use super::reply::{as_i64, as_string, as_u64, corrupt, parse_state, settled_record, two_strings};
use super::{Keys, RedisStore};
use crate::ids::derived_id;
use crate::room::opening::draw_key;
use crate::store::{
    InstantAdmission, JoinLimit, JoinOutcome, JoinRefusal, JoinReply, LeaveOutcome, QueueCursor,
    QueueDelta, RoomCounts, SseRefresh, StoreError, TicketRecord,
};

/// How `join.lua` is asked to join.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct JoinMode<'a> {
    /// The room's draw seed for a join in the pre-queue window (`A[13]`, and the ticket's
    /// place in the drawn order, `A[15..16]`); `None` for an ordinary join.
    pub prequeue_seed: Option<&'a [u8]>,
    /// The settings version the join was decided on (`A[14]`; `None` checks nothing).
    pub settings_version: Option<u64>,
}

impl RedisStore {
    pub(super) async fn join_with_limit_in_redis(
        &self,
        room: &str,
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
        let now_ms = crate::store::now_ms();
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
                instant.keep_ms.to_string(),
            ),
            None => (String::new(), "0".into(), "0".into()),
        };
        // join.lua's `A[1] A[2] A[5] A[7..16]` (the shared A[3], A[4], A[6] go once per call).
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
        };
        let reply = self.joins.join(room, join).await?;
        if let ([id, _, _, expires_at], Some(instant)) = (reply.as_slice(), instant) {
            // Admitted at once (join.lua's fourth field: the token's expiry).
            return Ok(JoinReply::Joined(JoinOutcome {
                ticket: TicketRecord {
                    id: as_string(id)?,
                    state: vestibule_shared::TicketState::TokenIssued,
                    position: None,
                    entry_token: Some(instant.token.clone()),
                    token_expires_at_ms: Some(as_u64(expires_at)?),
                    place_kept: false,
                },
                created: true,
            }));
        }
        let [id, created, position] = reply.as_slice() else {
            return Err(StoreError::Corrupt("join reply needs 3 fields".into()));
        };
        let created = as_i64(created)?;
        let position = as_i64(position)?;
        if created == -2 {
            return Ok(JoinReply::RateLimited {
                retry_after_ms: position.max(0) as u64,
            });
        }
        if created == -3 {
            return Ok(JoinReply::Refused(JoinRefusal::SoldOut));
        }
        if created == -4 {
            return Ok(JoinReply::Refused(JoinRefusal::Closed));
        }
        if created == -5 {
            return Ok(JoinReply::SettingsChanged);
        }
        if created == -7 {
            return Err(StoreError::RoomDeleted(room.to_owned()));
        }
        if created == -6 {
            // A random room: join again with the ticket's lottery key (the store remembers the
            // room is random from now on).
            if lottery_seed.is_some() {
                return Err(StoreError::Corrupt(
                    "join.lua asked again for lottery keys it was given".into(),
                ));
            }
            self.note_lottery(room, true);
            return Box::pin(
                self.join_with_limit_in_redis(room, dedup_key, new_id, limit, instant, mode),
            )
            .await;
        }
        let id = as_string(id)?;
        let ticket = if position > 0 {
            TicketRecord::waiting(&id, position as u64)
        } else if position == -3 {
            TicketRecord {
                state: vestibule_shared::TicketState::PreQueue,
                position: None,
                ..TicketRecord::waiting(&id, 0)
            }
        } else {
            // The deduplicated ticket has been admitted since: read it whole.
            self.ticket_in_redis(room, &id, now_ms)
                .await?
                .ok_or_else(|| StoreError::Corrupt("deduplicated ticket vanished".into()))?
        };
        Ok(JoinReply::Joined(JoinOutcome {
            ticket,
            created: created == 1,
        }))
    }

    /// `join.lua`'s look-up of a key's ticket, without joining: the dedup entry, else the key's
    /// derived id; only a live ticket counts (see `Store::keyed_ticket`).
    pub(super) async fn keyed_ticket_in_redis(
        &self,
        room: &str,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        let mut connection = self.link.connection.clone();
        let mapped: Option<String> = self
            .link
            .bounded(
                redis::cmd("HGET")
                    .arg(Keys::new(room).key("dedup"))
                    .arg(key)
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        let id = match mapped {
            Some(id) => id,
            None => derived_id(&self.room_secret(room).await?, key),
        };
        let record = self.ticket_in_redis(room, &id, now_ms).await?;
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

    pub(super) async fn ticket_in_redis(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        let keys = Keys::new(room);
        // ZRANK first: if it finds the ticket it is waiting, whatever happens after.
        let mut pipe = redis::pipe();
        pipe.zrank(keys.key("queue"), id)
            .sismember(keys.key("prequeue"), id)
            .cmd("HMGET")
            .arg(keys.key(&format!("ticket:{id}")))
            .arg(&["state", "tok", "exp"])
            .hget(keys.key("settings"), "qmethod")
            .exists(keys.key("lottery_filing"))
            .hget(keys.key("lottery_mac"), id);
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
                            .arg(keys.key("lottery"))
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

    pub(super) async fn sse_refresh_in_redis(
        &self,
        room: &str,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.sse_refresh.key(keys.key("queue"));
        invocation
            .key(keys.key("popped"))
            .key(keys.key("left"))
            .key(keys.key("left_count"))
            .key(keys.key("prequeue"))
            .key(keys.key("settings"))
            .key(keys.key("lottery"))
            .key(keys.key("lottery_mac"))
            .key(keys.key("lottery_filing"))
            .arg(&keys.prefix);
        match since {
            Some(cursor) => invocation.arg("1").arg(cursor.popped).arg(cursor.left),
            None => invocation.arg("0").arg(0).arg(0),
        };
        for id in ids {
            invocation.arg(id);
        }
        let reply = self
            .link
            .run_script(&invocation)
            .await
            .map_err(StoreError::for_read)?;
        let number = |index: usize| {
            reply
                .get(index)
                .map_or(Err(corrupt("number", &Value::Nil)), as_u64)
        };
        let cursor = QueueCursor {
            popped: number(0)?,
            left: number(1)?,
        };
        let reset = number(2)? == 1;
        let popped = number(3)?;
        let leavers = number(4)? as usize;
        // A leaver's seq, or a return's -seq (a skipped ticket back at its place: hear.lua).
        let events: Vec<i64> = (5..5 + leavers)
            .map(|index| reply.get(index).map_or(Ok(0), as_i64))
            .collect::<Result<_, _>>()?;
        let (returned, left): (Vec<i64>, Vec<i64>) = events.into_iter().partition(|e| *e < 0);
        let mut left_seqs: Vec<u64> = left.into_iter().map(|seq| seq as u64).collect();
        let mut returned_seqs: Vec<u64> = returned.into_iter().map(i64::unsigned_abs).collect();
        left_seqs.sort_unstable();
        returned_seqs.sort_unstable();
        let entries = reply.get(5 + leavers..).unwrap_or_default();
        if entries.len() != ids.len() * 5 {
            return Err(StoreError::Corrupt(
                "sse_refresh reply has the wrong length".into(),
            ));
        }
        let tickets = ids
            .iter()
            .zip(entries.chunks_exact(5))
            .map(|(id, entry)| {
                let position = as_u64(&entry[0])?;
                if position > 0 {
                    let seq = as_string(&entry[1])?.parse().ok();
                    return Ok(Some((TicketRecord::waiting(id, position), seq)));
                }
                let record = settled_record(
                    id,
                    &as_string(&entry[2])?,
                    as_string(&entry[3])?,
                    &as_string(&entry[4])?,
                    now_ms,
                )?;
                Ok(record.map(|record| (record, None)))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(SseRefresh {
            cursor,
            delta: (!reset).then_some(QueueDelta {
                popped,
                left_seqs,
                returned_seqs,
            }),
            tickets,
        })
    }

    pub(super) async fn leave_in_redis(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.leave.key(keys.key("queue"));
        invocation
            .key(keys.key("active"))
            .key(keys.key("left"))
            .key(keys.key("left_count"))
            .key(keys.key("prequeue"))
            .key(keys.key("prequeue_order"))
            .key(keys.key("prequeue_mac"))
            .key(keys.key("lottery"))
            .key(keys.key("lottery_mac"))
            .key(keys.key(super::settings::GONE))
            .arg(id)
            .arg(now_ms)
            .arg(keep_ms)
            .arg(&keys.prefix);
        let reply = self.link.run_script(&invocation).await?;
        let (outcome, state) = two_strings(&reply)?;
        Ok(match outcome.as_str() {
            "LEFT" => LeaveOutcome::Left,
            "NOT_FOUND" => LeaveOutcome::NotFound,
            _ => LeaveOutcome::AlreadyEnded(parse_state(&state)?),
        })
    }

    pub(super) async fn counts_in_redis(
        &self,
        room: &str,
        now_ms: u64,
    ) -> Result<RoomCounts, StoreError> {
        let keys = Keys::new(room);
        let mut pipe = redis::pipe();
        pipe.zcard(keys.key("queue"))
            .zcount(keys.key("active"), format!("({now_ms}"), "+inf");
        let mut connection = self.link.connection.clone();
        let (waiting, active): (u64, u64) = self
            .link
            .bounded(pipe.query_async(&mut connection))
            .await
            .map_err(StoreError::for_read)?;
        Ok(RoomCounts { waiting, active })
    }
}
