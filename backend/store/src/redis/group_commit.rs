//! Joins of one room sent to Redis together (a group commit).
//!
//! A join costs Redis one `join.lua` run and the server one script call (its 15 keys and 17
//! arguments encoded, a trip through the multiplexed connection, a wake-up when the answer
//! comes). In a rush most of that is the same for every join of a room. So a serving thread's
//! joins of one room queue in a lane here; one task per busy lane sends what is waiting as one
//! `join.lua` call (the keys and the shared arguments once, then each join's own), and while that
//! call is out the next joins gather for the one after it. A join that comes to an idle lane goes
//! at once: nothing waits for a batch to fill.
//!
//! What does not change: `join.lua` runs the joins of a batch one after another, each exactly as
//! it would run alone (Redis runs nothing else in between), so arrival seqs follow the lane's
//! order, idempotency keys and limits hold across a batch as across calls, and each join gets
//! its own answer. A failure of the call (Redis gone, the timeout) is every join's answer. Joins
//! with an idempotency key go in batches of their own, which are resent once when their
//! connection turns out to have dropped ([`Link::run_value_repeatable`]); a join without one is
//! never sent twice. The sending task is spawned, so a shopper who hangs up does not stop the
//! joins that came after theirs; a join whose shopper hung up before its batch left is dropped.
//!
//! A join waits at most the store timeout in all, however many calls are ahead of it in the lane
//! (while Redis hangs each call takes the whole timeout, and a lane of 500 joins would otherwise
//! wait 8 calls' worth): one still in the lane then answers [`StoreError::Unavailable`] (it was
//! not sent: nothing changed, 503) and is left out of the calls, one whose call is out answers
//! [`StoreError::OutcomeUnknown`] (504), as a join alone would. When Redis refuses a call or
//! cannot be reached (nothing ran: 503), the joins waiting behind it get that answer at once
//! instead of meeting it one call after another.
//!
//! A join answered 504 may have made a ticket whose id its shopper never learned (docs/DESIGN.md
//! "Joins nobody heard the answer of"). Its call's failure (or an answer that came after the
//! shopper was told 504) sends `park.lua` for the ids it may have made at once, on the same
//! connection, so Redis runs it after the join if the join ran at all: the ticket, unheard since,
//! leaves the line held, and takes no slot and no place until its shopper is heard from. A park
//! that fails too (Redis still frozen or away) is tried again every [`PARK_RETRY`] for as long as
//! the room's abandon time (after which the skip rule takes the ticket out anyway), at most
//! [`MOST_PARKS`] at a time.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::Value;
use tokio::sync::oneshot;

use super::keys::RoomKeys;
use super::presence::{park, Parking};
use super::reply::corrupt;
use super::script::Loaded;
use super::{specs, Link, DEDUP_TTL_SECS};
use crate::{RoomId, StoreError};

/// Arguments of one join in a `join.lua` call (the items of its spec).
pub(super) const PER_JOIN: usize = 13;

/// The most joins in one call: Redis runs a batch without a break (~10 µs per join), so this
/// bounds how long one call holds it (well under a millisecond).
const MOST_PER_CALL: usize = 64;

/// How often parks that failed are tried again.
const PARK_RETRY: Duration = Duration::from_secs(1);

/// The most parks waiting to be tried again per connection (the oldest give way): a bound on
/// what a long outage can pile up; the skip rule still takes any ticket left out of the line
/// after the abandon time.
const MOST_PARKS: usize = 10_000;

/// One join's own arguments to `join.lua`: an item of its spec, in that order.
pub(super) struct Join {
    pub args: [String; PER_JOIN],
    /// It carries an idempotency key: sending it twice makes one ticket.
    pub keyed: bool,
    /// What to park should its shopper be told 504 (`None`: nothing, e.g. a pre-queue join).
    pub park: Option<ParkPlan>,
}

/// The tickets a join may make, and how long they are held and tried, should its answer not
/// reach its shopper.
pub(super) struct ParkPlan {
    /// The ids it may make: its fresh id, and with a key the key's derived id.
    pub ids: Vec<String>,
    pub hold_ms: u64,
    pub keep_ms: u64,
    /// How long to keep trying the park.
    pub retry_for: Duration,
}

/// A park that failed, to try again.
struct PendingPark {
    room: (String, u64),
    parking: Parking,
    until: Instant,
}

/// The joins of every room waiting to be sent on one connection.
pub(super) struct GroupCommit {
    link: Arc<Link>,
    script: Loaded,
    /// A lane per room generation: one call checks one generation.
    lanes: Mutex<HashMap<(String, u64), Lane>>,
    park_script: Loaded,
    /// Parks to try again, and whether a task is trying them.
    parks: Mutex<(VecDeque<PendingPark>, bool)>,
}

#[derive(Default)]
struct Lane {
    waiting: VecDeque<Waiting>,
    /// A task is sending this lane's joins (it goes on until the lane is empty).
    sending: bool,
}

struct Waiting {
    join: Join,
    answer: oneshot::Sender<Result<String, StoreError>>,
    /// Taken into a call (set under the lanes' lock, as the waiter reads it when its time is up).
    taken: Arc<AtomicBool>,
    /// Its waiter gave up and answered 504 (set before it stops listening).
    gave_up: Arc<AtomicBool>,
}

impl GroupCommit {
    pub(super) fn new(link: Arc<Link>) -> Self {
        Self {
            link,
            script: specs::JOIN.load(),
            lanes: Mutex::new(HashMap::new()),
            park_script: specs::PARK.load(),
            parks: Mutex::new((VecDeque::new(), false)),
        }
    }

    /// Runs `join` in `room` with whatever other joins of the room go at the same time; answers
    /// `join.lua`'s line for this join (see the script's header).
    ///
    /// # Errors
    /// The call's error ([`StoreError::Unavailable`], [`StoreError::OutcomeUnknown`],
    /// [`StoreError::RoomGone`]), or [`StoreError::Corrupt`] when the reply does not have one
    /// line per join.
    pub(super) async fn join(
        self: &Arc<Self>,
        room: RoomId<'_>,
        join: Join,
    ) -> Result<String, StoreError> {
        let (answer, mut answered) = oneshot::channel();
        let taken = Arc::new(AtomicBool::new(false));
        let gave_up = Arc::new(AtomicBool::new(false));
        let lane_key = (room.slug.to_owned(), room.generation);
        let start = {
            let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
            let lane = lanes.entry(lane_key.clone()).or_default();
            lane.waiting.push_back(Waiting {
                join,
                answer,
                taken: taken.clone(),
                gave_up: gave_up.clone(),
            });
            !std::mem::replace(&mut lane.sending, true)
        };
        if start {
            tokio::spawn(self.clone().send(lane_key));
        }
        let unanswered = || {
            StoreError::OutcomeUnknown("the join's call to Redis ended without an answer".into())
        };
        match tokio::time::timeout(self.link.timeout, &mut answered).await {
            Ok(answer) => answer.unwrap_or_else(|_| Err(unanswered())),
            Err(_) => {
                // Closed under the lock that `next_batch` takes: either it was taken already
                // (its call is out: unknown) or it never will be (not sent: nothing changed).
                let _lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
                // Before it stops listening: an answer that finds it gone then parks the ticket.
                gave_up.store(true, Ordering::Relaxed);
                answered.close();
                if let Ok(answer) = answered.try_recv() {
                    // Answered just as the time ran out.
                    return answer;
                }
                if taken.load(Ordering::Relaxed) {
                    Err(self.link.timed_out())
                } else {
                    Err(StoreError::Unavailable(format!(
                        "Redis took no join of this room within {} ms",
                        self.link.timeout.as_millis()
                    )))
                }
            }
        }
    }

    /// Sends the lane's joins, a batch per call, until none wait.
    async fn send(self: Arc<Self>, room: (String, u64)) {
        // The script's keys, named once for all the calls of this busy spell.
        let keys = RoomKeys::new(RoomId::new(&room.0, room.1));
        let _unwinding = ForgetLaneOnPanic {
            commit: &self,
            room: &room,
        };
        loop {
            let batch = self.next_batch(&room);
            if batch.is_empty() {
                return;
            }
            let now_ms = crate::now_ms();
            match self.call(&keys, room.1, &batch, now_ms).await {
                Ok(replies) => {
                    for (waiting, reply) in batch.into_iter().zip(replies) {
                        let Err(Ok(reply)) = waiting.answer.send(Ok(reply)) else {
                            continue;
                        };
                        // Answered after its shopper was told 504: a ticket it made waits
                        // unknown to anyone.
                        if let (true, Some(plan)) =
                            (waiting.gave_up.load(Ordering::Relaxed), &waiting.join.park)
                        {
                            if let Some(id) = made_and_waiting(&reply) {
                                self.park(&room, plan, vec![id.to_owned()], now_ms);
                            }
                        }
                    }
                }
                Err(error) => {
                    // Redis refused or could not be reached (nothing of the call ran): the joins
                    // still waiting would only meet the same in calls of their own, one after
                    // another (a reconnect's retries each); they get the answer now, unsent.
                    let unsent = match &error {
                        StoreError::Unavailable(_) | StoreError::RoomGone(_) => {
                            self.take_waiting(&room)
                        }
                        _ => Vec::new(),
                    };
                    if let StoreError::OutcomeUnknown(_) = error {
                        // Every join of the call may have made its ticket, and each is answered
                        // 504: their tickets are parked.
                        for waiting in &batch {
                            if let Some(plan) = &waiting.join.park {
                                self.park(&room, plan, plan.ids.clone(), now_ms);
                            }
                        }
                    }
                    for waiting in batch.into_iter().chain(unsent) {
                        let _ = waiting.answer.send(Err(error.clone()));
                    }
                }
            }
        }
    }

    /// Takes the next batch from `room`'s lane: the joins of the first one's kind (keyed or not)
    /// in their order, at most [`MOST_PER_CALL`], leaving out those whose shopper hung up. An
    /// empty batch ends the sending task (the lane is marked idle under the same lock).
    fn next_batch(&self, room: &(String, u64)) -> Vec<Waiting> {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(lane) = lanes.get_mut(room) else {
            return Vec::new();
        };
        lane.waiting.retain(|waiting| !waiting.answer.is_closed());
        let Some(keyed) = lane.waiting.front().map(|first| first.join.keyed) else {
            lanes.remove(room);
            return Vec::new();
        };
        let mut batch = Vec::new();
        let mut others = VecDeque::new();
        while let Some(waiting) = lane.waiting.pop_front() {
            if batch.len() == MOST_PER_CALL {
                lane.waiting.push_front(waiting);
                break;
            }
            if waiting.join.keyed == keyed {
                waiting.taken.store(true, Ordering::Relaxed);
                batch.push(waiting);
            } else {
                others.push_back(waiting);
            }
        }
        // The other kind keeps its place at the head of the lane.
        while let Some(waiting) = others.pop_back() {
            lane.waiting.push_front(waiting);
        }
        batch
    }

    /// Every join waiting in `room`'s lane (none of them sent).
    fn take_waiting(&self, room: &(String, u64)) -> Vec<Waiting> {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        lanes
            .get_mut(room)
            .map(|lane| lane.waiting.drain(..).collect())
            .unwrap_or_default()
    }

    /// One `join.lua` call for `batch` on the room `keys` name at `generation`; one reply line
    /// per join.
    async fn call(
        &self,
        keys: &RoomKeys,
        generation: u64,
        batch: &[Waiting],
        now_ms: u64,
    ) -> Result<Vec<String>, StoreError> {
        let mut call = self.script.call(keys);
        call.arg("generation", generation)
            .arg("prefix", keys.prefix())
            .arg("dedup_ttl", DEDUP_TTL_SECS)
            .arg("now_ms", now_ms);
        for waiting in batch {
            call.item(&waiting.join.args);
        }
        // Looked up per call, not kept: a store may open before the recorder is installed.
        metrics::counter!("vestibule_redis_join_calls_total").increment(1);
        metrics::counter!("vestibule_redis_joins_sent_total").increment(batch.len() as u64);
        // All of one kind (`next_batch`): keyed joins mean the same sent twice.
        let reply = if batch.iter().all(|waiting| waiting.join.keyed) {
            self.link.run_value_repeatable(&call).await?
        } else {
            self.link.run_value(&call).await?
        };
        let replies = unpack(&reply)?;
        if replies.len() != batch.len() {
            return Err(StoreError::Corrupt(format!(
                "join.lua answered {} joins of {}",
                replies.len(),
                batch.len()
            )));
        }
        Ok(replies)
    }
}

impl GroupCommit {
    /// Parks `ids`, which a join of `room` sent at `joined_ms` may have made, per `plan`: sent
    /// now on this connection (after the join), tried again later if that fails.
    fn park(
        self: &Arc<Self>,
        room: &(String, u64),
        plan: &ParkPlan,
        ids: Vec<String>,
        joined_ms: u64,
    ) {
        let pending = PendingPark {
            room: room.clone(),
            parking: Parking {
                ids,
                joined_ms,
                hold_ms: plan.hold_ms,
                keep_ms: plan.keep_ms,
            },
            until: Instant::now() + plan.retry_for,
        };
        let commit = self.clone();
        tokio::spawn(async move {
            if commit.try_park(&pending).await {
                commit.park_later(pending);
            }
        });
    }

    /// One try of `pending`: whether to try it again (Redis did not answer or refused for now).
    async fn try_park(&self, pending: &PendingPark) -> bool {
        let room = RoomId::new(&pending.room.0, pending.room.1);
        match park(
            &self.link,
            &self.park_script,
            room,
            &pending.parking,
            crate::now_ms(),
        )
        .await
        {
            Ok(parked) => {
                metrics::counter!("vestibule_unconfirmed_joins_parked_total")
                    .increment(parked.len() as u64);
                false
            }
            Err(StoreError::Unavailable(_) | StoreError::OutcomeUnknown(_)) => true,
            // The room was deleted (or lost: written back within a tick, and the skip rule
            // still applies), or a bug: nothing to try again.
            Err(error) => {
                tracing::warn!(%error, "a join's ticket could not be parked");
                false
            }
        }
    }

    /// Keeps `pending` to try again every [`PARK_RETRY`], starting the task that does.
    fn park_later(self: &Arc<Self>, pending: PendingPark) {
        let start = {
            let mut parks = self.parks.lock().unwrap_or_else(PoisonError::into_inner);
            if parks.0.len() == MOST_PARKS {
                parks.0.pop_front();
            }
            parks.0.push_back(pending);
            !std::mem::replace(&mut parks.1, true)
        };
        if start {
            tokio::spawn(self.clone().retry_parks());
        }
    }

    /// Tries the kept parks again every [`PARK_RETRY`] until none is left.
    async fn retry_parks(self: Arc<Self>) {
        loop {
            tokio::time::sleep(PARK_RETRY).await;
            let due: Vec<PendingPark> = {
                let mut parks = self.parks.lock().unwrap_or_else(PoisonError::into_inner);
                parks.0.drain(..).collect()
            };
            let now = Instant::now();
            let mut again = Vec::new();
            // After one fails the others would only wait out the store timeout in turn: they
            // wait for the next round.
            let mut stalled = false;
            for pending in due {
                if pending.until <= now {
                    continue;
                }
                if stalled || self.try_park(&pending).await {
                    stalled = true;
                    again.push(pending);
                }
            }
            let mut parks = self.parks.lock().unwrap_or_else(PoisonError::into_inner);
            for pending in again.into_iter().rev() {
                if parks.0.len() < MOST_PARKS {
                    parks.0.push_front(pending);
                }
            }
            if parks.0.is_empty() {
                parks.1 = false;
                return;
            }
        }
    }
}

/// The id of the ticket a `join.lua` line says the join made and left waiting.
fn made_and_waiting(line: &str) -> Option<&str> {
    let mut words = line.split(' ');
    match (words.next(), words.next(), words.next()) {
        (Some("waiting"), Some(id), Some("1")) => Some(id),
        _ => None,
    }
}

/// `join.lua`'s packed reply: its lines, one per join.
///
/// # Errors
/// [`StoreError::Corrupt`] when the reply is not text.
fn unpack(reply: &Value) -> Result<Vec<String>, StoreError> {
    let Value::BulkString(bytes) = reply else {
        return Err(corrupt("join.lua's packed reply", reply));
    };
    let text = std::str::from_utf8(bytes).map_err(|_| corrupt("text", reply))?;
    Ok(text.split('\n').map(str::to_owned).collect())
}

/// Were the sending task to panic, its lane would stay marked busy and no join of the room on
/// this connection would be sent again: the lane goes (its waiting joins answer 504 at once; the
/// next join starts a fresh one).
struct ForgetLaneOnPanic<'a> {
    commit: &'a GroupCommit,
    room: &'a (String, u64),
}

impl Drop for ForgetLaneOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.commit
                .lanes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(self.room);
        }
    }
}
