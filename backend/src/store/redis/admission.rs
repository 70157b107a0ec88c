//! One leader tick: `admit.lua`.

use super::reply::{as_i64, parse_versioned, split_sale, with_schedule};
use super::{Keys, RedisStore};
use crate::store::{AdmitOutcome, AdmitRequest, StoreError};

impl RedisStore {
    pub(super) async fn admit_in_redis(
        &self,
        room: &str,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.admit.key(keys.key("queue"));
        invocation
            .key(keys.key("active"))
            .key(keys.key("leader"))
            .key(keys.key("epoch"))
            .key(keys.key("settings"))
            .key(keys.key("popped"))
            .key(keys.key("left"))
            .key(keys.key("left_count"))
            .key(keys.key("sweep"))
            .key(keys.key("sweep_low"))
            .key(keys.key("seq"))
            .key(keys.key("bank"))
            .key(keys.key("pace"))
            .key(keys.key("prequeue"))
            .key(keys.key("lottery"))
            .key(keys.key("lottery_mac"))
            .key(keys.key("lottery_filing"))
            .key(keys.key(super::settings::GONE))
            .arg(request.holder)
            .arg(request.epoch)
            .arg(request.now_ms)
            .arg(request.token_ttl_ms)
            .arg(request.keep_ms)
            .arg(request.max_active_users.map_or(-1, |cap| cap as i64))
            .arg(&keys.prefix)
            .arg(request.lease_ms)
            .arg(request.abandon_after_ms)
            .arg(request.hold_place_ms)
            .arg(request.instant_bank_max)
            .arg(request.pace.map(|pace| pace.encode()).unwrap_or_default());
        for token in request.tokens {
            invocation.arg(token);
        }
        let reply = self.link.run_script(&invocation).await?;
        if reply.len() != 32 {
            return Err(StoreError::Corrupt("admit reply needs 32 fields".into()));
        }
        let (reply, sale, labels, method) = split_sale(&reply)?;
        let numbers: Vec<i64> = reply[..5].iter().map(as_i64).collect::<Result<_, _>>()?;
        let [admitted, expired, waiting, active, skipped] = numbers.as_slice() else {
            unreachable!("five numbers");
        };
        if *admitted < 0 {
            return Ok(AdmitOutcome {
                fenced: true,
                ..AdmitOutcome::default()
            });
        }
        self.note_lottery(room, method.is_random());
        // A switch to random whose filing is not done (its replica died, or a skipped ticket
        // came back unfiled): the leader files the waiting tickets now; this tick admitted nobody.
        if as_i64(&reply[18])? == 1 {
            self.file_lottery(room).await?;
        }
        Ok(AdmitOutcome {
            fenced: false,
            admitted: *admitted as u64,
            expired: *expired as u64,
            waiting: *waiting as u64,
            active: *active as u64,
            skipped: *skipped as u64,
            settings: parse_versioned(&reply[5..17])
                .and_then(|versioned| with_schedule(versioned, &reply[19..21]))
                .ok()
                .map(|mut settings| {
                    settings.settings.sale = sale;
                    settings.settings.labels = labels;
                    settings.settings.queueing_method = method;
                    settings
                }),
            popped: as_i64(&reply[17])?.max(0) as u64,
        })
    }
}
